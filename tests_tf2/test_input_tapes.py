"""Tape misuse, in eager code, in a tf.function and in a v1 Graph: an eager tensor without
its tape, a spent tape, a source the tape never watched, a target another tape recorded.
TensorFlow gives None (or zeros) for the last two, the same as for a source the target does
not depend on; compat_grads raises, and unconnected_gradients="zero" does not hide it.

A source the tape never watched is a row of the case table
(compat_grads.testing._suite.bad_inputs); here the kinds that need a test of their own.
"""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite.bad_input_routes import TOL, X, raises, run

XT = tf.constant([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
def test_eager_tensor_target_without_tape(fn):
    with pytest.raises(cg.ModeError, match=rf"compat_grads\.{fn.__name__}: target is an eager "
                                           r"tensor, but no tape was given\. Pass the "
                                           r"GradientTape .*tape=.* or pass a callable"):
        fn(br.square(XT), XT)


@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
def test_used_non_persistent_tape(fn):
    with tf.GradientTape() as tape:
        tape.watch(XT)
        y = br.square(XT)
    tape.gradient(y, XT)
    with pytest.raises(RuntimeError, match=rf"compat_grads\.{fn.__name__}: the tape has no "
                                           r"record.*already used.*persistent=True"):
        fn(y, XT, tape=tape)


def test_persistent_tape_can_be_used_again():
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(XT)
        y = br.square(XT)
    first = cg.stacked_jacobian(y, XT, tape=tape)
    second = cg.per_element_gradients(y, XT, tape=tape)
    np.testing.assert_allclose(second, 2 * XT.numpy())
    assert first.shape == (2, 2, 2, 2)


def test_tape_with_callable_target():
    with tf.GradientTape() as tape:
        pass
    with pytest.raises(ValueError, match=r"tape= is only used with a tensor target"):
        cg.stacked_jacobian(br.square, XT, tape=tape)


def _spacer(x):
    """A target computed from x, recorded or not, as each test arranges."""
    return x ** 3


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_slice_taken_after_recording(mode):
    """The known trap: `tape.gradient(f, xy[:, 0])` is None; here a clear error."""
    def build(xy):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xy)
            f = 3 * xy[:, 0] ** 2 * xy[:, 1]
        return cg.batch_jacobian(f, xy[:, 0], tape=tape, unconnected_gradients="zero")
    with raises(cg.ModeError, "batch_jacobian", r"source was not watched by the tape",
                r"a slice such as x\[:, 0\] taken after recording is a new tensor"):
        run(f"{mode}.tape", build, X)


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_variable_the_tape_does_not_watch(mode):
    def build(x, w):
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(x)
            y = x * w
        return cg.stacked_jacobian(y, [x, w], tape=tape, unconnected_gradients="zero")
    with raises(cg.ModeError, "stacked_jacobian", r"sources\[1\] is a variable the tape does "
                r"not watch", r"watch_accessed_variables=False", r"tape\.watch\(v\)"):
        run(f"{mode}.tape", build, X, variables=[2.0])


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_target_recorded_by_another_tape_still_recording(mode):
    """Nested tapes: the inner tape's gradient is recorded by the outer one only."""
    def build(x):
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(x)
            with tf.GradientTape(persistent=True) as inner:
                inner.watch(x)
                y = tf.reduce_sum(_spacer(x))
            gradient = inner.gradient(y, x)
            with raises(cg.ModeError, "stacked_jacobian", r"target was not recorded by the "
                        r"tape given, but by another GradientTape that is still recording",
                        r"Pass the tape that recorded the target"):
                cg.stacked_jacobian(gradient, x, tape=inner, unconnected_gradients="zero")
            right = cg.stacked_jacobian(gradient, x, tape=outer)
        return right
    np.testing.assert_allclose(run(f"{mode}.tape", build, X),
                               br.jacobian_of_elementwise(6 * X.astype(np.float64)), rtol=TOL)


@pytest.mark.parametrize("unconnected", ["none", "zero"])
@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_target_recorded_by_another_tape_that_stopped(mode, unconnected):
    """The target was computed under a second tape, after the first one's block ended."""
    def build(x):
        with tf.GradientTape(persistent=True) as first:
            first.watch(x)
        with tf.GradientTape(persistent=True) as second:
            second.watch(x)
            y = _spacer(x)
        with raises(cg.ModeError, "stacked_jacobian", r"target was not recorded by the tape "
                    r"given, but by another GradientTape that has stopped recording",
                    r"Pass the tape whose `with` block computed the target"):
            cg.stacked_jacobian(y, x, tape=first, unconnected_gradients=unconnected)
        return cg.stacked_jacobian(y, x, tape=second)
    np.testing.assert_allclose(run(f"{mode}.tape", build, X),
                               br.jacobian_of_elementwise(3 * X.astype(np.float64) ** 2), rtol=TOL)


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_constant_target_is_unconnected_not_misrecorded(mode):
    """A target made through tf.stop_gradient is recorded by no tape: its derivatives are
    rightly zeros, even with another tape alive that recorded other things."""
    def build(x):
        with tf.GradientTape(persistent=True) as other:
            other.watch(x)
            _spacer(x)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = tf.stop_gradient(x) * 2.0
        return cg.stacked_jacobian(y, x, tape=tape, unconnected_gradients="zero")
    np.testing.assert_array_equal(run(f"{mode}.tape", build, X), np.zeros(X.shape * 2))


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_watched_source_the_target_does_not_depend_on(mode):
    """Not a mistake: a watched source the target does not use gives None, or zeros."""
    def build(a, b):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, b])
            y = a ** 2
        return [cg.stacked_jacobian(y, [a, b], tape=tape, unconnected_gradients=u)
                for u in ("none", "zero")]
    a = np.array([1.0, -2.0], np.float32)
    (da, db), (da_zero, db_zero) = run(f"{mode}.tape", build, a, np.ones(3, np.float32))
    assert db is None
    np.testing.assert_array_equal(da, np.diag(2 * a))
    np.testing.assert_array_equal(da_zero, np.diag(2 * a))
    np.testing.assert_array_equal(db_zero, np.zeros((2, 3)))


@pytest.mark.parametrize("mode", br.TF2_MODES)
def test_variable_the_target_never_read(mode):
    """A tape watches the variables it sees read: one it never saw is truly unconnected."""
    def build(x, v, w):
        with tf.GradientTape(persistent=True) as tape:
            y = v * x[0]
        return cg.stacked_jacobian(y, [v, w], tape=tape, unconnected_gradients="zero")
    dv, dw = run(f"{mode}.tape", build, X, variables=[[1.0, 2.0], [3.0]])
    np.testing.assert_array_equal(dv, np.diag(X[0]))
    np.testing.assert_array_equal(dw, np.zeros((2, 1)))


def test_target_computed_after_the_tapes_block():
    """In a tf.function the graph shows the target computed from the source, which the tape
    never recorded: its `with` block had ended (eager tensors keep no such record)."""
    def build(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
        y = x ** 3
        return cg.stacked_jacobian(y, x, tape=tape, unconnected_gradients="zero")
    with raises(cg.ModeError, "stacked_jacobian", r"target was computed from the sources, "
                r"but the tape given recorded nothing of it", r"after the tape's `with` block "
                r"ended", r"Compute the target inside the `with"):
        run("function.tape", build, X)


def test_swapped_arguments_on_a_tape_in_a_function():
    def build(x):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = x ** 3
        return cg.stacked_jacobian(x, y, tape=tape)
    with raises(ValueError, "stacked_jacobian", r"sources is computed from the target",
                r"the arguments look swapped", r"stacked_jacobian\(y, x\)"):
        run("function.tape", build, X)


@pytest.mark.parametrize("persistent", [False, True], ids=["tape", "persistent_tape"])
@pytest.mark.parametrize("fn", br.FIRST_ORDER_FUNCTIONS, ids=br.FIRST_ORDER)
def test_swapped_arguments_on_a_tape_in_eager_code(fn, persistent):
    """Eager tensors keep no ancestry, but they are made in order: a source made after the
    target cannot be one of its inputs (TensorFlow gives None)."""
    with tf.GradientTape(persistent=persistent) as tape:
        tape.watch(XT)
        y = _spacer(XT)
    with raises(ValueError, fn.__name__, r"sources? was computed after the target",
                r"the arguments look swapped", rf"{fn.__name__}\(y, x\)"):
        fn(XT, y, tape=tape)


def test_a_source_made_after_the_target_among_others():
    """One source of a list made after the target is named by its place in the list; the
    same call the right way round is a value."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(XT)
        y = _spacer(XT)
        z = 2.0 * y
    with raises(ValueError, "stacked_jacobian", r"sources\[1\] was computed after the target"):
        cg.stacked_jacobian(y, [XT, z], tape=tape)
    np.testing.assert_allclose(cg.per_element_gradients(z, [XT], tape=tape)[0],
                               6.0 * XT.numpy() ** 2, rtol=TOL)


KINDS = (  # kind, "value" or "error", test
    ("an eager tensor target without its tape", "error",
     "test_eager_tensor_target_without_tape"),
    ("a spent non-persistent tape", "error", "test_used_non_persistent_tape"),
    ("a persistent tape used again", "value", "test_persistent_tape_can_be_used_again"),
    ("tape= with a callable target", "error", "test_tape_with_callable_target"),
    ("a slice taken after recording", "error", "test_slice_taken_after_recording"),
    ("a variable the tape does not watch", "error", "test_variable_the_tape_does_not_watch"),
    ("a target another, recording tape recorded", "error",
     "test_target_recorded_by_another_tape_still_recording"),
    ("a target another tape recorded, which has stopped", "error",
     "test_target_recorded_by_another_tape_that_stopped"),
    ("a target made through tf.stop_gradient, on a tape", "value",
     "test_constant_target_is_unconnected_not_misrecorded"),
    ("a watched source the target does not use", "value",
     "test_watched_source_the_target_does_not_depend_on"),
    ("a variable the target never read", "value", "test_variable_the_target_never_read"),
    ("a target computed after the tape's block (in a tf.function)", "error",
     "test_target_computed_after_the_tapes_block"),
    ("swapped arguments on a tape (in a tf.function)", "error",
     "test_swapped_arguments_on_a_tape_in_a_function"),
    ("swapped arguments on a tape (in eager code)", "error",
     "test_swapped_arguments_on_a_tape_in_eager_code"),
    ("a source made after the target, one of several (eager)", "error",
     "test_a_source_made_after_the_target_among_others"),
)
