"""JAX's recipes for the bench's workloads, compiled with `jax.jit` as JAX's users write
them, each taking its weights as an argument of the compiled function.

TensorFlow's recipes read their weights as a `tf.function`'s captured inputs; a JAX program
that closes over numpy weights holds them as constants instead, and XLA may compute with
them when it compiles (J·1 of tanh(A x) with ones as the tangent: `A 1` folded, one product
at run time where every TensorFlow recipe has two). With the weights as arguments both do
the same work when they run.
"""

from __future__ import annotations

import numpy as np

try:  # optional: pip install "compat_grads[bench]" jax
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - depends on the machine
    jax = None


def call(derivative, f, params, x):
    """A timed recipe: `derivative(lambda v: f(params, v))(x)` under `jax.jit`, `params` (a
    pytree of arrays) an argument of the compiled function."""
    compiled = jax.jit(lambda p, v: derivative(lambda u: f(p, u))(v))
    params, x = jax.tree_util.tree_map(jnp.asarray, params), jnp.asarray(np.asarray(x))
    return lambda: compiled(params, x).block_until_ready()


def jacobians(f, params, x) -> dict:
    """`jax.jit(jacfwd)` and `jax.jit(jacrev)` of `f(params, x)` in x; none without JAX."""
    if jax is None:
        return {}
    return {"jax.jit(jacfwd)": call(jax.jacfwd, f, params, x),
            "jax.jit(jacrev)": call(jax.jacrev, f, params, x)}


def matvec(a, x):
    """tanh(A x)."""
    return jnp.tanh(a @ x)


def mlp(weights, x):
    """The bench's tanh MLP (`workloads._mlp`) on a batch x: weights a list of matrices."""
    for w in weights:
        x = jnp.tanh(x @ w)
    return x


def one_sample(f):
    """f(params, v) of one sample v through f(params, batch)."""
    return lambda p, v: f(p, v[None])[0]


def ones_product(g):
    """J·1: g's derivative along a tangent of ones (one forward product)."""
    return lambda v: jax.jvp(g, (v,), (jnp.ones_like(v),))[1]


def per_sample(derivative):
    """`vmap` of `derivative` over the samples of a batch model g (one sample in: v[None])."""
    return lambda g: jax.vmap(derivative(lambda v: g(v[None])[0]))
