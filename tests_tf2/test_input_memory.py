"""A Jacobian that cannot fit: refused at once, before anything is built or run.

Rows in flight above a small max_bytes (and the chunk_size that fits) are rows of the case
table (compat_grads.testing.bad_inputs).
"""

import numpy as np
import pytest

from compat_grads.testing.bad_input_routes import (
    HUGE,
    MATERIALISING,
    huge_shape,
    huge_target,
    refused_before_building,
    routes_of,
    run,
    stop_stacking,
)


@pytest.fixture
def no_work(monkeypatch):
    stop_stacking(monkeypatch)


@pytest.mark.parametrize("name, route", [pytest.param(n, r, id=f"{n}-{r}") for n in MATERIALISING
                                         for r in routes_of(n)])
def test_jacobian_too_big_for_memory_fails_before_anything_is_built(name, route, no_work):
    run(route, lambda x, w: refused_before_building(name, route, huge_target(name, w), x, w),
        np.zeros(huge_shape(name), np.float32), variables=[np.zeros(HUGE, np.float32)])




KINDS = (  # kind, "value" or "error", test
    ("a Jacobian too big for memory", "error",
     "test_jacobian_too_big_for_memory_fails_before_anything_is_built"),
)
