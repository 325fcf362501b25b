"""The shim: the one place that decides which backend serves a call.

| mode       | tensor target      | tensor + tape | callable target |
|------------|--------------------|---------------|-----------------|
| "graph"    | graph              | tape          | graph           |
| "function" | graph              | tape          | graph           |
| "eager"    | error (needs tape) | tape          | tape            |

"graph" is a TF1 graph, a `tf.Graph().as_default()` block inside TF2, or a `tf.function`
traced inside such a graph; "function" is a `tf.function` traced from eager code.
"""

from compat_grads._src.backends.graph import GraphBackend
from compat_grads._src.backends.tape import TapeBackend
from compat_grads._src.call.value import Capture
from compat_grads._src.core.errors import ModeError, message
from compat_grads._src.core.models import is_keras3
from compat_grads._src.core.structure import Problem, eager_tensor_error, graph_of, leaf_paths
from compat_grads._src.core.tf import graph_in_xla_context, tf
from compat_grads._src.core.types import Mode

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
    """Whether the calling code executes eagerly: the question other modules ask the shim
    instead of reading the mode themselves."""
    return execution_mode() == EAGER


def in_tf1_graph() -> bool:
    """Whether the calling code builds a TF1 graph (or a `tf.Graph().as_default()` block, or
    a `tf.function` traced inside one): the "graph" mode."""
    return execution_mode() == GRAPH


def backend_for(problem: Problem, order: int = 1):
    """The backend that serves `problem` in the current mode (see the table above).

    Second order (`order=2`) differentiates the first derivative again, so the target must
    be recomputable: a callable in every mode, or a graph tensor without a tape.
    """
    _check_graphs(problem)
    if order > 1:
        _check_second_order(problem)
    check_model_mode(problem.function, problem.fn)
    if problem.tape is not None:
        return TapeBackend(problem)
    if execution_mode() == EAGER:
        if problem.fn is None:
            raise eager_tensor_error(problem.function)
        return TapeBackend(problem)
    return GraphBackend(problem)


def check_model_mode(function: str, model) -> None:
    """Keras 3 has no graph mode: refuse a Keras 3 model in a TF1 graph or v1 Graph."""
    if isinstance(model, Capture):  # has_aux= / return_value= wrap the callable
        model = model.__wrapped__
    if model is not None and execution_mode() == GRAPH and is_keras3(model):
        raise ModeError(message(
            function, f"{type(model).__name__} is a Keras 3 object, and Keras 3 cannot run "
            "in a TF1 graph or a tf.Graph().as_default() block (it has no graph mode)",
            "In TF1 graph code use tf_keras (pip install tf-keras, and set "
            "TF_USE_LEGACY_KERAS=1 before importing TensorFlow so tf.keras is tf_keras); "
            "Keras 3 models work in eager code and in tf.function."))


def _check_graphs(problem: Problem):
    """Graph tensors (and variables) must belong to the graph being built, or to a graph it
    is nested in (a tf.function or loop body traced inside it, which captures them).

    TensorFlow's own errors here name its internal tensors (`Shape:0`), and a graph tensor
    in eager code is not an eager tensor: no tape= can help."""
    eager = execution_mode() == EAGER
    current = None if eager else tf.compat.v1.get_default_graph()
    named = [("target", problem.target),
             *zip(leaf_paths(problem.structure, problem.argument), problem.flat)]
    for what, value in named:
        graph = graph_of(value)
        if graph is not None and (eager or not _encloses(current, graph)):
            raise _foreign_graph_error(problem.function, what, eager)


def _encloses(graph, other) -> bool:
    """Whether `other` is `graph` or a graph it is nested in (FuncGraph.outer_graph)."""
    while graph is not None:
        if graph is other:
            return True
        graph = getattr(graph, "outer_graph", None)
    return False


def _foreign_graph_error(function, what, eager):
    if eager:
        return ModeError(message(
            function, f"{what} is a graph tensor (of a tf.Graph built in a `with "
            "graph.as_default():` block), but this call runs eagerly, outside that block: "
            "that graph is not the default one here",
            "Make the call inside `with graph.as_default():` and run its result in a "
            "tf.compat.v1.Session of that graph (in eager code, use eager tensors)."))
    return ValueError(message(
        function, f"{what} is a tensor of another tf.Graph than the one being built (the "
        "default graph here): target and sources must come from one graph",
        "Build the target from its sources in one graph, and make the call inside that "
        "graph's `with graph.as_default():` block."))


def _check_second_order(problem: Problem):
    if problem.tape is not None:
        raise ModeError(message(
            problem.function, "a second-order derivative cannot reuse a tape: the first "
            "derivative must itself be recorded, and the tape only holds the target",
            "Pass a callable f(sources) (every mode); in a graph or tf.function the tensor "
            "without tape= works too."))
    if problem.fn is None and execution_mode() == EAGER:
        raise ModeError(message(
            problem.function, "target is an eager tensor, but a second-order derivative "
            "needs to run the computation again",
            "Pass a callable f(sources) that computes the target."))


def compiles_with_xla() -> bool:
    """Whether the graph being built is compiled by XLA: the body of a `tf.function` with
    `jit_compile=True` (ours or the caller's), or a graph nested in one. Eager code is not.
    A static fact of the graph, which `strategy="auto"` reads (`_cost.plan`)."""
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
