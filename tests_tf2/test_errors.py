"""Bad input gets a clear error: the function, what it needs, what it got, and the fix."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg

FUNCTIONS = [cg.stacked_jacobian, cg.per_element_gradients, cg.batch_jacobian]
NAMES = [f.__name__ for f in FUNCTIONS]
X = tf.constant([[1.0, 2.0], [3.0, 4.0]])


def square(x):
    return x ** 2


@pytest.mark.parametrize("fn", FUNCTIONS, ids=NAMES)
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.bool])
def test_integer_or_bool_sources(fn, dtype):
    x = tf.zeros((2, 2), dtype)
    argument = "source" if fn is cg.batch_jacobian else "sources"
    with pytest.raises(TypeError, match=rf"compat_grads\.{fn.__name__}: {argument} must be "
                                        rf"floating-point .* got .*{dtype.name}.*tf\.cast"):
        fn(lambda x: tf.cast(x, tf.float32), x)


def test_integer_leaf_in_a_nest_is_named():
    with pytest.raises(TypeError, match=r"sources\['b'\] must be floating-point"):
        cg.stacked_jacobian(lambda s: s["a"], {"a": X, "b": tf.constant([1, 2])})


@pytest.mark.parametrize("fn", FUNCTIONS, ids=NAMES)
def test_eager_tensor_target_without_tape(fn):
    with pytest.raises(cg.ModeError, match=rf"compat_grads\.{fn.__name__}: target is an eager "
                                           r"tensor, but no tape was given\. Pass the "
                                           r"GradientTape .*tape=.* or pass a callable"):
        fn(square(X), X)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=NAMES)
def test_used_non_persistent_tape(fn):
    with tf.GradientTape() as tape:
        tape.watch(X)
        y = square(X)
    tape.gradient(y, X)
    with pytest.raises(RuntimeError, match=rf"compat_grads\.{fn.__name__}: the tape has no "
                                           r"record.*already used.*persistent=True"):
        fn(y, X, tape=tape)


def test_persistent_tape_can_be_used_again():
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(X)
        y = square(X)
    first = cg.stacked_jacobian(y, X, tape=tape)
    second = cg.per_element_gradients(y, X, tape=tape)
    np.testing.assert_allclose(second, 2 * X.numpy())
    assert first.shape == (2, 2, 2, 2)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=NAMES)
@pytest.mark.parametrize("target", [3.0, np.ones(3), "y", None, [X]], ids=repr)
def test_target_neither_tensor_nor_callable(fn, target):
    with pytest.raises(TypeError, match=rf"compat_grads\.{fn.__name__}: target must be a "
                                        r"tf\.Tensor or a callable.* but target is"):
        fn(target, X)


def test_integer_target():
    with pytest.raises(TypeError, match=r"target must have a floating-point dtype.*int32"):
        cg.stacked_jacobian(lambda x: tf.argmax(x, output_type=tf.int32), X)


def test_callable_returning_a_nest():
    with pytest.raises(TypeError, match=r"the callable target returned list.*tf\.stack"):
        cg.stacked_jacobian(lambda x: [x, x], X)


@pytest.mark.parametrize("fn", [cg.stacked_jacobian, cg.batch_jacobian])
def test_unknown_strategy_lists_valid_ones(fn):
    with pytest.raises(ValueError, match=r"strategy must be one of 'auto', 'reverse', "
                                         r"'forward', 'loop', but got 'fastest'"):
        fn(square, X, strategy="fastest")


@pytest.mark.parametrize("fn", FUNCTIONS, ids=NAMES)
@pytest.mark.parametrize("sources", [[], (), {}], ids=repr)
def test_empty_sources(fn, sources):
    argument = "source" if fn is cg.batch_jacobian else "sources"
    with pytest.raises(ValueError, match=rf"compat_grads\.{fn.__name__}: {argument} is empty"):
        fn(lambda s: tf.constant(1.0), sources)


@pytest.mark.parametrize("value, error", [("zeros", ValueError), (0, TypeError),
                                          (None, TypeError)])
def test_unknown_unconnected_gradients(value, error):
    with pytest.raises(error, match=r"unconnected_gradients must be 'none', 'zero'"):
        cg.stacked_jacobian(square, X, unconnected_gradients=value)


def test_tape_with_callable_target():
    with tf.GradientTape() as tape:
        pass
    with pytest.raises(ValueError, match=r"tape= is only used with a tensor target"):
        cg.stacked_jacobian(square, X, tape=tape)


def test_tape_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"tape must be a tf\.GradientTape, but got str"):
        cg.stacked_jacobian(square(X), X, tape="tape")


def test_batch_jacobian_mismatched_batch_sizes():
    with pytest.raises(ValueError, match=r"compat_grads\.batch_jacobian: target and source "
                                         r"must have the same batch size .*\(3, 2\).*\(2, 2\)"):
        cg.batch_jacobian(lambda x: tf.tile(x, [2, 1])[:3], X)


@pytest.mark.parametrize("which", ["target", "source"])
def test_batch_jacobian_missing_batch_dimension(which):
    if which == "target":
        call = lambda: cg.batch_jacobian(lambda x: tf.reduce_sum(x), X)  # noqa: E731
    else:
        call = lambda: cg.batch_jacobian(lambda x: tf.stack([x, x]), tf.constant(1.0))  # noqa: E731
    with pytest.raises(ValueError, match=rf"batch_jacobian: {which} needs a leading batch "
                                         r"dimension, but it is a scalar"):
        call()


def test_batch_jacobian_unknown_batch_mismatch_fails_at_run_time_with_our_message():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2])
        y = tf.compat.v1.placeholder_with_default(tf.zeros([3, 2]), [None, 2]) + x[:1]
        block = cg.batch_jacobian(y, x)
        with tf.compat.v1.Session() as session:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"compat_grads\.batch_jacobian: target and source must "
                                     r"have the same batch size"):
                session.run(block, {x: np.ones((2, 2), np.float32)})


def test_batch_jacobian_takes_one_source():
    with pytest.raises(TypeError, match=r"batch_jacobian: source must be one tensor or "
                                        r"variable, but got a list of 2"):
        cg.batch_jacobian(lambda s: s[0] * s[1], [X, X])


def test_non_tensor_source_for_tensor_target():
    with tf.GradientTape() as tape:
        tape.watch(X)
        y = square(X)
    with pytest.raises(TypeError, match=r"sources must be a tf\.Tensor or tf\.Variable, but "
                                        r"got ndarray"):
        cg.stacked_jacobian(y, np.ones(2), tape=tape)


def test_numpy_sources_are_fine_for_a_callable():
    out = cg.per_element_gradients(lambda x: x ** 2, np.array([1.0, 2.0]))
    np.testing.assert_allclose(out, [2.0, 4.0])
