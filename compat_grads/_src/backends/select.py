"""The backend choice: the one place that decides which backend serves a call.

| mode       | tensor target      | tensor + tape | callable target |
|------------|--------------------|---------------|-----------------|
| "graph"    | graph              | tape          | graph           |
| "function" | graph              | tape          | graph           |
| "eager"    | error (needs tape) | tape          | tape            |

The mode is `compat_grads._src.core.mode`'s.
"""

from compat_grads._src.backends.graph import GraphBackend
from compat_grads._src.backends.tape import TapeBackend
from compat_grads._src.core.errors import ModeError, message
from compat_grads._src.core.mode import in_tf1_graph, runs_eagerly
from compat_grads._src.core.structure import Problem, eager_tensor_error, graph_of, leaf_paths
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import is_keras3


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
    if runs_eagerly():
        if problem.fn is None:
            raise eager_tensor_error(problem.function)
        return TapeBackend(problem)
    return GraphBackend(problem)


def check_model_mode(function: str, model) -> None:
    """Keras 3 has no graph mode: refuse a Keras 3 model in a TF1 graph or v1 Graph."""
    if getattr(model, "is_capture", False):  # has_aux= / return_value= wrap the callable
        model = model.__wrapped__
    if model is not None and in_tf1_graph() and is_keras3(model):
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
    eager = runs_eagerly()
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
    if problem.fn is None and runs_eagerly():
        raise ModeError(message(
            problem.function, "target is an eager tensor, but a second-order derivative "
            "needs to run the computation again",
            "Pass a callable f(sources) that computes the target."))
