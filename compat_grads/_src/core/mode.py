"""The execution mode of the calling code, and the facts that follow from it: the one place
that asks TensorFlow which mode it is in (`tests_tf2/test_house.py` holds everything else to
asking here). "graph" is a TF1 graph, a `tf.Graph().as_default()` block inside TF2, or a
`tf.function` traced inside such a graph; "function" is a `tf.function` traced from eager
code."""

from typing import Literal

from compat_grads._src.core.tf import graph_in_xla_context, tf

Mode = Literal["graph", "function", "eager"]

GRAPH: Mode = "graph"
FUNCTION: Mode = "function"
EAGER: Mode = "eager"


def execution_mode() -> Mode:
    """The execution mode of the calling code: "graph", "function" or "eager".

    Returns:
      "eager" when TensorFlow executes eagerly; "function" while tracing a `tf.function`
      that was called from eager code; "graph" in a TF1 graph (v2 behaviour disabled) or
      inside a `tf.Graph().as_default()` block in TF2.

    Example:
      >>> import tensorflow as tf
      >>> import compat_grads as cg
      >>> cg.execution_mode()
      'eager'
    """
    if tf.executing_eagerly():
        return EAGER
    # While tracing, init_scope lifts to the outermost context: eager for a tf.function
    # called from eager code, the graph itself for v1 graphs.
    if tf.compat.v1.executing_eagerly_outside_functions():
        return FUNCTION
    return GRAPH


def runs_eagerly() -> bool:
    """Whether the calling code executes eagerly: the question other modules ask here
    instead of reading the mode themselves."""
    return execution_mode() == EAGER


def in_tf1_graph() -> bool:
    """Whether the calling code builds a TF1 graph (or a `tf.Graph().as_default()` block, or
    a `tf.function` traced inside one): the "graph" mode."""
    return execution_mode() == GRAPH


def compiles_with_xla() -> bool:
    """Whether the graph being built is compiled by XLA: the body of a `tf.function` with
    `jit_compile=True` (ours or the caller's), or a graph nested in one. Eager code is not.
    A static fact of the graph, which `strategy="auto"` reads
    (`compat_grads._src.stacking.cost.plan`)."""
    if runs_eagerly():
        return False
    return graph_in_xla_context(tf.compat.v1.get_default_graph())


def as_graph(build):
    """Runs `build()` so the loops it creates become graph ops.

    Graph and function modes already build graphs; in eager mode the loops are traced once
    in a `tf.function` so that they run as one program (and a non-persistent tape is
    differentiated once, at trace time).
    """
    if execution_mode() != EAGER:
        return build()
    compiled = tf.function(build, autograph=False)
    # Each call traces a new one-off function on purpose (the loop closes over this call's
    # tensors), so TensorFlow's "frequent retracing" warning would only point at us.
    compiled._omit_frequent_tracing_warning = True
    return compiled()
