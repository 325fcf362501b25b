"""The port harness from a TF1 process (v2 behaviour disabled here): the graph modes run,
the TF2 ones and compare_port say why they cannot."""

import numpy as np
import pytest

from compat_grads import ModeError
from compat_grads._src.core.tf import tf
from compat_grads.testing import compare_port, modes


def _scaled(x):
    return {"y": x * tf.Variable(2.0), "n": 3}


@pytest.mark.parametrize("mode", ["tf1", "v1_graph"])
def test_graph_modes_run_here(mode):
    out = modes.run(_scaled, [np.arange(3, dtype=np.float32)], mode)
    np.testing.assert_array_equal(out["y"], [0.0, 2.0, 4.0])
    assert out["n"] == 3


@pytest.mark.parametrize("mode", ["function", "eager"])
def test_tf2_modes_need_tf2(mode):
    with pytest.raises(ModeError, match=f'mode "{mode}" needs TF2 behaviour'):
        modes.run(_scaled, [np.ones(3, np.float32)], mode)


def test_compare_port_needs_tf2():
    with pytest.raises(ModeError, match="compare_port: the port runs in TF2"):
        compare_port(_scaled, _scaled, {"x": np.ones(3, np.float32)})
