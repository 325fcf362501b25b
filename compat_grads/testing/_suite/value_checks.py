"""The checks of `has_aux=` / `return_value=` both suites run: the callable targets of every
function that takes one, a target that counts its calls and names its ops, and the graph
check that the value costs no extra forward pass (TF1 graphs, and a v1 Graph inside TF2)."""

from __future__ import annotations

import numpy as np

import compat_grads as cg
from compat_grads._src.core.tf import tf

RNG = np.random.RandomState(3)
X = RNG.randn(4, 3).astype(np.float32)
W = RNG.randn(3, 3).astype(np.float32)


def mlp(x):
    return tf.tanh(tf.matmul(x, tf.constant(W)))


def per_sample(x):
    return tf.reduce_sum(tf.sin(x) ** 3, axis=1)


def scalar(x):
    return tf.reduce_sum(tf.sin(x) ** 3)


# function, target, extra positional arguments, options it takes, strategies
CALLS = [
    ("stacked_jacobian", mlp, (), ("auto", "reverse", "forward", "loop")),
    ("per_element_gradients", mlp, (), (None,)),
    ("batch_jacobian", mlp, (), ("auto", "reverse", "forward", "loop")),
    ("hessian", scalar, (), ("auto", "reverse", "forward", "loop")),
    ("batch_hessian", per_sample, (), ("auto", "reverse", "forward", "loop")),
    ("hvp", scalar, (X,), (None,)),
    ("jvp", mlp, (X,), (None,)),
    ("vjp", mlp, (np.ones((4, 3), np.float32),), (None,)),
]
TRANSFORMS = ("jvp", "vjp")
CASES = [(name, f, extra, s) for name, f, extra, strategies in CALLS for s in strategies]
IDS = [f"{name}-{s}" if s else name for name, _, _, s in CASES]


class Counted:
    """A target that counts its Python calls and names its ops `counted_f/...`."""

    def __init__(self, f, aux=False):
        self.f, self.aux, self.calls = f, aux, 0

    def __call__(self, x):
        self.calls += 1
        with tf.name_scope("counted_f"):
            y = self.f(x)
        return (y, {"twice": 2.0 * y, "rows": rows(y)}) if self.aux else y


def rows(y):
    """The first column of `y`'s rows (per sample: it keeps the batch axis)."""
    if y.shape.rank == 0:
        return tf.reshape(y, [1, 1])
    return tf.reshape(y, [tf.shape(y)[0], -1])[:, :1]


def call(name, f, extra, strategy, x, **options):
    kwargs = dict(options)
    if strategy is not None:
        kwargs["strategy"] = strategy
    if name in TRANSFORMS:
        kwargs.pop("return_value", None)
    return getattr(cg, name)(f, x, *[tf.constant(e) for e in extra], **kwargs)


def options(name):
    return {"has_aux": True} if name in TRANSFORMS else {"has_aux": True, "return_value": True}


def parts(name, result):
    """(value, aux, derivative) of a result with has_aux (and return_value)."""
    if name in TRANSFORMS:
        outputs, products, aux = result
        return outputs, aux, products
    (value, aux), derivative = result
    return value, aux, derivative


def assert_same(a, b):
    for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def _ops_of_f(graph):
    return sum(op.name.startswith("counted_f") for op in graph.get_operations())


def assert_graph_builds_f_no_extra_time(name, f, extra, strategy):
    """In a tf.Graph (a TF1 graph in the TF1 suite): with has_aux and return_value, `f` is
    called, and its ops built, as often as without; the derivative is the same bit for bit;
    the value and aux are right."""
    counts, results = [], []
    for valued in (False, True):
        graph = tf.Graph()
        with graph.as_default():
            target = Counted(f, aux=valued)
            x = tf.compat.v1.placeholder(tf.float32, X.shape)
            out = call(name, target, extra, strategy, x, **(options(name) if valued else {}))
            counts.append((_ops_of_f(graph), target.calls))
            with tf.compat.v1.Session(graph=graph) as session:
                results.append(session.run(out, {x: X}))
    assert counts[1] == counts[0], f"{name}: (ops, calls) {counts[1]} vs plain {counts[0]}"
    value, aux, derivative = parts(name, results[1])
    assert_same(derivative, results[0][1] if name in TRANSFORMS else results[0])
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        want = session.run(f(tf.constant(X)))
    np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(aux["twice"], 2.0 * value)
