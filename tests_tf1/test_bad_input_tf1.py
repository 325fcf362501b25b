"""Bad and unusual input in a TF1 graph (v2 behaviour disabled: RefVariables, v1 control
flow): the case table of compat_grads.testing._suite.bad_inputs on its TF1 routes, and the kinds
only TF1 has (a TF1 tf.while_loop in the target), each with the exact right value or a
compat_grads error naming the function, the argument and what to do.

Routes: "tf1.callable" (a callable target), "tf1.tensor" (the tensor it returns) and
"tf1.tape" (with the tape that recorded it); tests_tf2/test_input_*.py run the TF2 routes.
"""

import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite import bad_inputs
from compat_grads.testing._suite.bad_input_routes import TOL, X, call, raises, run


@pytest.mark.parametrize("case, route", bad_inputs.params((br.TF1,)))
def test_bad_input(case, route):
    br.check(case, route)


def test_the_gradient_of_a_gather_from_a_variable_is_indexed_slices():
    """What the library must densify (the table's gather-* rows)."""
    def build(_, v):
        gradient = tf.compat.v1.gradients(tf.gather(v, [2, 0, 2]), v)[0]
        assert isinstance(gradient, tf.IndexedSlices)
        return tf.convert_to_tensor(gradient)
    np.testing.assert_array_equal(run(br.TF1_BOTH[0], build, X, variables=[[1.0, 2.0, 3.0]]),
                                  [1.0, 0.0, 2.0])


@pytest.fixture
def no_work(monkeypatch):
    br.stop_stacking(monkeypatch)


@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian", "hessian",
                                  "batch_hessian"])
@pytest.mark.parametrize("route", br.TF1_BOTH)
def test_jacobian_too_big_for_memory_fails_before_anything_is_built(route, name, no_work):
    target = br.huge_target(name, None)
    run(route, lambda x: br.refused_before_building(name, route, target, x, None, 12),
        np.zeros(br.huge_shape(name), np.float32))


def in_graph(build, *arrays):
    """`build(*placeholders)` in a new TF1 graph, run in a Session fed `arrays`."""
    return run(br.TF1_BOTH[0], build, *arrays)


# ----------------------------------------------------------------------------------------
# A TF1 tf.while_loop in the target: TF1 cannot build its gradient inside another loop, but
# it can build the loop and its gradient together inside one. A callable target is run
# again for each row (a VectorizationWarning says so); a tensor target, and the gradient of
# the gradient forward mode needs, are DerivativeErrors.

def _v1_loop(x):
    """x³, elementwise, by a TF1 while_loop."""
    _, y = tf.compat.v1.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x),
                                   (0, tf.ones_like(x)))
    return y


def _v1_loop_sum(x):
    return tf.reduce_sum(_v1_loop(x))


@pytest.mark.parametrize("strategy", ["auto", "reverse", "loop"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian"])
def test_v1_while_loop_in_a_callable_target(name, strategy):
    x = X.astype(np.float64)
    want = (br.jacobian_of_elementwise(3 * x ** 2) if name == "stacked_jacobian"
            else br.per_sample(3 * x ** 2))
    with pytest.warns(cg.VectorizationWarning, match=rf"{name}: the target runs a TF1 "
                      r"tf\.while_loop.*running the target again for each"):
        out = in_graph(lambda x: getattr(cg, name)(_v1_loop, x, strategy=strategy), X)
    np.testing.assert_allclose(out, want, rtol=TOL)


def test_v1_while_loop_vjp():
    out = in_graph(lambda x: cg.vjp(_v1_loop, x, tf.ones_like(x))[1], X)
    np.testing.assert_allclose(out, 3 * X.astype(np.float64) ** 2, rtol=TOL)


@pytest.mark.parametrize("strategy", ["auto", "reverse", "forward", "loop"])
@pytest.mark.parametrize("name", ["stacked_jacobian", "batch_jacobian"])
def test_v1_while_loop_in_a_tensor_target(name, strategy):
    with raises(cg.DerivativeError, name, r"the target runs a TF1 tf\.while_loop",
                r"needs it once per row", r"Pass the target as a callable"):
        in_graph(lambda x: getattr(cg, name)(_v1_loop(x), x, strategy=strategy), X)


FORWARD_MODE_THROUGH_A_V1_LOOP = {  # TF1 has no gradient of a while_loop's gradient
    "stacked_jacobian-forward": lambda x: cg.stacked_jacobian(_v1_loop, x, strategy="forward"),
    "per_element_gradients": lambda x: cg.per_element_gradients(_v1_loop, x),
    "per_element_gradients-tensor": lambda x: cg.per_element_gradients(_v1_loop(x), x),
    "jvp": lambda x: cg.jvp(_v1_loop, x, tf.ones_like(x)),
    "hvp": lambda x: cg.hvp(_v1_loop_sum, x, tf.ones_like(x)),
    "hessian": lambda x: cg.hessian(_v1_loop_sum, x),
    "hessian-loop": lambda x: cg.hessian(_v1_loop_sum, x, strategy="loop"),
}


@pytest.mark.parametrize("case", FORWARD_MODE_THROUGH_A_V1_LOOP)
def test_v1_while_loop_forward_mode_and_second_order(case):
    name = case.split("-")[0]
    with raises(cg.DerivativeError, name, r"tf\.while_loop", r"(no second derivative|"
                r"differentiate the gradient of this target)", r"(reverse mode|differentiate "
                r"once)"):
        in_graph(FORWARD_MODE_THROUGH_A_V1_LOOP[case], X)


# ----------------------------------------------------------------------------------------
# tf.py_function in a TF1 graph, second order (the first-order kinds are rows of the table).

_TOTAL = lambda x: tf.reduce_sum(br.through_python(x))  # noqa: E731


@pytest.mark.parametrize("route,case,strategy", [  # hvp takes a callable, no strategy
    *((route, case, strategy) for route in br.TF1_BOTH
      for case in ("hessian", "hessian of a vector", "batch_hessian")
      for strategy in (None, "reverse", "forward", "loop")),
    (br.TF1_BOTH[0], "hvp", None)])
def test_py_function_second_order(route, case, strategy):
    """Its gradient runs in Python, unrecorded: tf.gradients would give None (a scalar
    target) or leave that part of the Hessian out."""
    options = {} if strategy is None else {"strategy": strategy}
    name = case.split()[0]
    target = {"hessian": _TOTAL, "hessian of a vector": br.through_python,
              "batch_hessian": lambda x: tf.reduce_sum(br.through_python(x), axis=1),
              "hvp": _TOTAL}[case]
    extra = (tf.ones(X.shape),) if case == "hvp" else ()
    with raises(cg.DerivativeError, name, r"tf\.py_function", r"EagerPyFunc",
                r"no second derivative through it", r"tf\.custom_gradient"):
        in_graph(lambda x: call(route, getattr(cg, name), target, x, *extra, **options), X)


# ----------------------------------------------------------------------------------------
# The catalogue: the table's kinds on the TF1 routes, and the plain tests above.

KINDS = (
    *bad_inputs.kinds((br.TF1,)),
    ("IndexedSlices gradients (gather from a variable)", "value",
     "test_the_gradient_of_a_gather_from_a_variable_is_indexed_slices"),
    ("a Jacobian too big for memory", "error",
     "test_jacobian_too_big_for_memory_fails_before_anything_is_built"),
    ("a TF1 while_loop in a callable target", "value",
     "test_v1_while_loop_in_a_callable_target"),
    ("a TF1 while_loop: vjp", "value", "test_v1_while_loop_vjp"),
    ("a TF1 while_loop in a tensor target", "error", "test_v1_while_loop_in_a_tensor_target"),
    ("a TF1 while_loop: forward mode and second order", "error",
     "test_v1_while_loop_forward_mode_and_second_order"),
    ("tf.py_function, second order", "error", "test_py_function_second_order"),
    ("a batch size known only at run time that differs", "error",
     "test_a_run_time_check_reports_compat_grads_words_first"),
)


@pytest.mark.parametrize("name", ["batch_jacobian", "batch_hessian", "batch_laplacian"])
def test_a_run_time_check_reports_compat_grads_words_first(name):
    """TensorFlow reports a failing op by its name and the Python frames that defined it,
    then its message: the op is named after the function and the problem and defined at
    the caller's line, so compat_grads' words lead the report, not its call stack."""
    x = tf.compat.v1.placeholder(tf.float32, [None, 2])
    y = tf.concat([x, x], 0)  # samples mixed: twice the batch
    target = y if name == "batch_jacobian" else tf.reduce_sum(y ** 3, 1)
    result = getattr(cg, name)(target, x)
    with tf.compat.v1.Session() as session:
        with pytest.raises(tf.errors.InvalidArgumentError) as failed:
            session.run(result, {x: np.ones((3, 2), np.float32)})
    lines = str(failed.value).splitlines()
    assert f"node 'compat_grads.{name}.target_and_source_must_have_the_same_batch_size" in (
        lines[2])
    frames = lines[3:next(i for i, line in enumerate(lines) if line.startswith("Node: "))]
    files = [line for line in frames if line.strip().startswith("File ")]
    assert files and f'File "{__file__}"' in files[-1]  # the caller's line, last
    assert not [f for f in frames if f"{os.sep}compat_grads{os.sep}" in f]
    told = lines[3 + len(frames) + 1]
    assert f"compat_grads.{name}: target and source must have the same batch size" in told
    assert "Pass the batched input" in told


def _totals():
    """tests_tf2/bad_input_totals.py, which reads the catalogue of both suites."""
    path = os.path.join(os.path.dirname(__file__), os.pardir, "tests_tf2",
                        "bad_input_totals.py")
    spec = importlib.util.spec_from_file_location("bad_input_totals", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_is_a_kind_of_the_catalogue():
    assert _totals().unnamed_tests("tf1") == {"test_bad_input_tf1.py": {
        "test_every_test_is_a_kind_of_the_catalogue", "test_every_kind_collects_a_test"}}


def test_every_kind_collects_a_test():
    table, problems = _totals().catalogue(["tf1"])
    assert problems == []
    assert {outcome for outcome, _ in table.values()} == {"value", "error"}
