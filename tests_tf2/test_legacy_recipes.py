"""The usual TF2 recipes (tape.jacobian then reduce_sum, nested tapes) next to compat_grads,
and the TF2 traps."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing import cases, oracle


def test_per_element_gradients_without_the_jacobian():
    case = cases.get("matmul_column")
    x_value, consts = case.inputs()
    a = tf.constant(consts["a"], tf.float32)
    x = tf.Variable(x_value.astype(np.float32))
    with tf.GradientTape() as tape:
        y = tf.matmul(a, x)
    recipe = tf.reduce_sum(tape.jacobian(y, x), axis=[2, 3])  # the usual TF2 way
    ours = cg.per_element_gradients(lambda x: tf.matmul(a, x), x)
    assert ours.shape == recipe.shape == (100, 1)
    np.testing.assert_allclose(ours, oracle.expected(case, "per_element_gradients")[0],
                               rtol=1e-5, atol=1e-5)


def test_rank1_per_sample_target():
    x = tf.constant(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.reduce_sum(x ** 2, axis=1)  # shape (3,): one scalar per sample
    with pytest.raises(ValueError):
        tape.batch_jacobian(y, x)  # TensorFlow rejects it
    np.testing.assert_allclose(cg.batch_jacobian(y, x, tape=tape), 2 * x.numpy())


def test_eager_results_are_eager_tensors():
    x = tf.constant([1.0, 2.0])
    out = cg.stacked_jacobian(lambda x: x ** 3, x)
    assert isinstance(out, tf.Tensor) and hasattr(out, "numpy")
    np.testing.assert_allclose(out, np.diag([3.0, 12.0]))


def test_nested_tapes_give_the_hessians_row_sums_as_the_traps_page_says():
    """docs/traps.rst: `tape2.gradient(df, xy)` of the inner gradient is each sample's
    Hessian row sums; the page's numbers are this run's."""
    import pathlib
    import re

    xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
    with tf.GradientTape() as tape2:
        tape2.watch(xy)
        with tf.GradientTape() as tape1:
            tape1.watch(xy)
            f = 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
        df = tape1.gradient(f, xy)
    row_sums = tape2.gradient(df, xy).numpy()[0]
    hessian = cg.batch_hessian(lambda v: 3 * v[:, 0] ** 2 * v[:, 1] + v[:, 1] ** 2, xy)[0]
    page = " ".join((pathlib.Path(__file__).resolve().parents[1] / "docs" / "traps.rst"
                     ).read_text().split())
    said = re.search(r"that is ``\[(.*?)\]``, where the Hessian is ``(\[\[.*?\]\])``", page)
    np.testing.assert_array_equal(row_sums, [float(v) for v in said.group(1).split(",")])
    np.testing.assert_array_equal(hessian, eval(said.group(2)))  # noqa: S307 - our page
    np.testing.assert_array_equal(row_sums, np.sum(hessian, 1))
