"""The execution modes, spelled in one place, and running a function on numpy arrays in each.

A mode is "tf1" (a TF1 graph process, `compat_grads.testing.remote`), "v1_graph" (a
`tf.Graph` with a Session in this TF2 process), "function" (`tf.function`) or "eager". The
pytest plugin's `tf_mode` values, the route ids of the matrix (`"v1_graph.tensor"`, see
`route`) and the Keras model routes are these spellings. The pytest plugin's `cg_run` and
`compare_port`'s legacy side are built on `run`.

The spellings are read at pytest start-up, before TensorFlow loads, so this module imports
TensorFlow only when a function here runs.
"""

from __future__ import annotations

import numpy as np

from compat_grads._src.core.errors import ModeError, message

TF1 = "tf1"
V1_GRAPH = "v1_graph"
FUNCTION = "function"
EAGER = "eager"
MODES = (TF1, V1_GRAPH, FUNCTION, EAGER)
XLA = "xla"
"""Eager calls with `jit_compile=True` (XLA): a mode of `check_derivatives` and the matrix's
"xla.callable" route (`routes.XLA_ROUTES`). Not in `MODES`: the plugin's `tf_mode` does not
run it."""
DERIVATIVE_MODES = (TF1, V1_GRAPH, FUNCTION, EAGER, XLA)

ALIASES = {"v1graph": V1_GRAPH}
"""Older spellings still accepted where users type them (`compat-grads check -k`)."""


def route(mode: str, kind: str) -> str:
    """The id of the route running `kind` ("tensor", "callable", ...) in `mode`, e.g.
    `route(V1_GRAPH, "tensor") == "v1_graph.tensor"`."""
    return f"{mode}.{kind}"


def canonical(text: str) -> str:
    """`text` with every older spelling of a mode replaced by the current one."""
    for old, new in ALIASES.items():
        text = text.replace(old, new)
    return text


def run(fn, arrays, mode: str, by_value=()):
    """`fn(*tensors)` in `mode`, one tensor per array (its dtype and shape); returns the
    output nest with each tensor as a numpy array. In graph modes the tensors are
    placeholders fed with the arrays and variables are initialized before the run."""
    __tracebackhide__ = True  # pytest: failures are in fn, not here
    arrays = [np.asarray(a) for a in arrays]
    if mode == TF1:
        from compat_grads.testing import remote

        return remote.call(in_session, fn, arrays, by_value=by_value,
                           label=f"cg_run({getattr(fn, '__qualname__', type(fn).__name__)})")
    if mode == V1_GRAPH:
        return in_session(fn, arrays)
    _check_tf2(mode)
    tf = _tf()
    call = tf.function(fn) if mode == FUNCTION else fn
    return to_numpy(call(*[tf.constant(a) for a in arrays]))


def in_session(fn, arrays):
    """`fn(*placeholders)` built in a new graph and run in a Session fed with `arrays`."""
    with _tf().Graph().as_default():
        feeds = [placeholder(a) for a in arrays]
        return session_values(fn(*feeds), dict(zip(feeds, arrays)))


def placeholder(array, name=None):
    tf = _tf()
    array = np.asarray(array)
    return tf.compat.v1.placeholder(tf.as_dtype(array.dtype), array.shape, name=name)


def session_values(fetches, feed_dict=None):
    """The values of the tensors and variables in the nest `fetches`, from a Session on the
    default graph with every variable and table initialized; other leaves stay as they are."""
    tf = _tf()
    flat = tf.nest.flatten(fetches)
    wanted = [i for i, leaf in enumerate(flat) if _is_tensor_like(leaf)]
    with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer(),
                     tf.compat.v1.tables_initializer()])
        values = session.run([flat[i] for i in wanted], feed_dict)
    for i, value in zip(wanted, values):
        flat[i] = np.asarray(value)
    return tf.nest.pack_sequence_as(fetches, flat)


def to_numpy(nest):
    """The nest with each eager tensor or variable as a numpy array."""
    return _tf().nest.map_structure(
        lambda leaf: np.asarray(leaf.numpy()) if _is_tensor_like(leaf) else leaf, nest)


def _is_tensor_like(leaf) -> bool:
    tf = _tf()
    return tf.is_tensor(leaf) or isinstance(leaf, tf.Variable)


def _tf():
    from compat_grads._src.core.tf import tf

    return tf


def _check_tf2(mode):
    from compat_grads.dispatch import runs_eagerly

    if runs_eagerly():
        return
    raise ModeError(message(
        "testing.modes.run", f'mode "{mode}" needs TF2 behaviour, but this code runs in '
        "a graph (v2 behaviour disabled in this process, or inside tf.Graph().as_default())",
        f'Run it from TF2 code, or choose "{TF1}" / "{V1_GRAPH}" '
        f"(pytest: --tf-modes={TF1},{V1_GRAPH})"))
