"""Double-gradient tricks the source does not prove equal to cg.per_element_gradients:
reported, each saying why, never rewritten."""
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [None, 2])
y = tf.sin(x) * 2.0


def with_tangents(u, x, v):
    """grad_ys on the second call: a Jacobian-vector product J·v, v not known to be ones."""
    dummy = tf.ones_like(u)
    g = tf.gradients(u, x, grad_ys=dummy)[0]
    return tf.gradients(g, dummy, grad_ys=v)[0]  # expect: CG106


def listed_sources(u, a, b):
    dummy = tf.ones_like(u)
    g = tf.gradients(u, [a, b], grad_ys=dummy)[0]
    return tf.gradients(g, dummy)[0]  # expect: CG106


def fed_dummy(u, x):
    """A placeholder is fed a shape of its own, which may broadcast against u's."""
    dummy = tf.placeholder(tf.float32, [None, 1])
    g = tf.gradients(u, x, grad_ys=dummy)[0]
    return tf.gradients(g, dummy)[0]  # expect: CG106


def dummy_in_source(u, x):
    """A source computed from the dummy: the second gradient has another path to it."""
    dummy = tf.ones_like(u)
    shifted = x + dummy
    g = tf.gradients(u, shifted, grad_ys=dummy)[0]
    return tf.gradients(g, dummy)[0]  # expect: CG106


def rebound_source(u, x):
    dummy = tf.ones_like(u)
    g = tf.gradients(u, x, grad_ys=dummy)[0]
    x = x + 1.0
    return tf.gradients(g, dummy)[0], x  # expect: CG106


def model_target(model, x):
    """The target is a call: the rewrite would build the model again."""
    dummy = tf.ones_like(model(x))
    g = tf.gradients(model(x), x, grad_ys=dummy)[0]
    return tf.gradients(g, dummy)[0]  # expect: CG106


def listed_result(u, x):
    dummy = tf.ones_like(u)
    g = tf.gradients(u, x, grad_ys=dummy)[0]
    return tf.gradients(g, dummy)  # expect: CG106
