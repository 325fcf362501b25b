"""A Jacobian that cannot fit: refused at once, before anything is built or run.

Rows in flight above a small max_bytes (and the chunk_size that fits) are rows of the case
table (compat_grads.testing._suite.bad_inputs).
"""

import numpy as np
import pytest

from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import run


@pytest.fixture
def no_work(monkeypatch):
    br.stop_stacking(monkeypatch)


@pytest.mark.parametrize("name, route", [pytest.param(n, r, id=f"{n}-{r}") for n in br.MATERIALISING
                                         for r in br.routes_of(n)])
def test_jacobian_too_big_for_memory_fails_before_anything_is_built(name, route, no_work):
    run(route, lambda x, w: br.refused_before_building(name, route, br.huge_target(name, w), x, w),
        np.zeros(br.huge_shape(name), np.float32), variables=[np.zeros(br.HUGE, np.float32)])




KINDS = (  # kind, "value" or "error", test
    ("a Jacobian too big for memory", "error",
     "test_jacobian_too_big_for_memory_fails_before_anything_is_built"),
)
