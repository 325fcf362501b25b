"""The two backends. Each serves one `Problem` through the same few primitives:

- `targets`: the flat list of target tensors (a callable target is run once, under the right
  recorder); `target` is the only one, for the Jacobian functions;
- `vjp_fn()`: a function `[u_t] -> [sum_t u_t·J_tk per source k]` (None cotangents skip
  their target), set up once and callable inside loops;
- `jvp_fn()`: a function `[v_k] -> [sum_k J_tk·v_k per target t]` (None tangents are zero);
- `linearize(tangents)`: the target outputs and their JVP, from one forward pass;
  `linearize_symmetric(tangents)` the same for a symmetric Jacobian (a Hessian's);
- `vjp_backend(cotangents_of)`: a backend of the same kind for the first derivative
  `x -> vjp(x, cotangents_of(targets))`, one target per source: second order composes;
- `cannot_vectorize()`: a reason pfor must not be tried, or None;
- `path_ops()`: the graph ops between the sources and the targets (what the static rule of
  `compat_grads._src.stacking.cost` and the control-flow checks read);
- `push_from(*tensors)`, `pull_from(*tensors)`: `jvp_fn` and `vjp_fn` from intermediate
  tensors of a graph target, where `starts_inside` (not on a tape);
- `forward_per_row()`: a reason each row must run the forward pass again, or None;
- `fresh()`: the same problem served anew (a callable target run again: the rows that need
  their own forward pass are built on it), or None for a tensor target;
- `vjp_reusable`: whether `vjp_fn`'s function can be traced again after a failed attempt.

`compat_grads._src.jacobians.jacobians` composes every public function from these. A None result
always
means "not connected"; a None gradient becomes zeros in a derivative problem, which keeps it
unconnected one order up.
"""

import dataclasses

from compat_grads._src.core.errors import DerivativeError, message
from compat_grads._src.core.graph_walk import between, op_of
from compat_grads._src.core.python_ops import python_op
from compat_grads._src.core.structure import Problem, densify, pairs
from compat_grads._src.core.tf import tf


class Backend:
    """What both backends share: the problem they serve."""

    name = "abstract"

    def __init__(self, problem: Problem):
        self._problem = problem

    @property
    def function(self) -> str:
        """The public function being served, for error messages."""
        return self._problem.function

    @property
    def order(self) -> int:
        """1 for the target's derivative, 2 for the derivative of its gradient."""
        return self._problem.order

    @property
    def target(self):
        (target,) = self.targets
        return target

    @property
    def sources(self) -> list:
        return self._problem.flat

    def fresh(self):
        """A backend that runs the callable target again, or None for a tensor target (and
        for a first derivative: the ops that need this have no second one)."""
        if self._problem.fn is None or self._problem.order > 1:
            return None
        return type(self)(self._problem)

    def forward_per_row(self):
        return None

    def linearize_symmetric(self, tangents):
        """`linearize` for a target whose Jacobian is symmetric (a gradient's: the Hessian),
        by whichever product is cheaper here; the same values."""
        return self.linearize(tangents)

    # Whether `push_from` / `pull_from` can start a product at a tensor inside the
    # target's graph (a tape cannot: it records only what it watched).
    starts_inside = False

    def push_from(self, *tensors):
        """`push([v per tensor]) -> [J_t·v per target]` from intermediate tensors of the
        target's graph (`starts_inside` backends only)."""
        raise NotImplementedError(self.name)

    def pull_from(self, *tensors):
        """`pull([u per tensor]) -> [uᵀ·J per source]` from intermediate tensors of the
        target's graph (`starts_inside` backends only)."""
        raise NotImplementedError(self.name)

    def differentiated(self) -> list:
        """The sources as the target's graph holds them (a resource variable's handle, the
        captured copy of an eager tensor), for walks over its ops."""
        return graph_sources(self.sources)

    def walkable(self) -> bool:
        """Whether the target is a graph tensor whose ops a walk can visit (the forward
        Laplacian's); False for an eager tensor (a tape's, in eager code)."""
        return op_of(self.target) is not None

    def path_ops(self) -> list:
        """The graph ops on a path from the sources to the targets (what a row
        differentiates; empty for eager tensors, which have none)."""
        return between(self.targets, self.sources)

    def sibling(self, fn):
        """A backend of the same kind, for the same sources and another callable target."""
        return type(self)(dataclasses.replace(self._problem, fn=fn, target=None, tape=None))

    def _derived(self, **changes) -> Problem:
        return dataclasses.replace(self._problem, **{
            "nested_target": True, "tape": None, "order": self._problem.order + 1, **changes})


def graph_sources(flat):
    """The sources as tensors of the graph being built: a resource variable's handle (it is
    differentiated through it), the captured copy of an eager tensor in a tf.function."""
    return [tf.convert_to_tensor(x.handle) if _is_resource_variable(x)
            else x if isinstance(x, tf.Variable) else tf.convert_to_tensor(x) for x in flat]


def _is_resource_variable(x):
    return isinstance(x, tf.Variable) and hasattr(x, "handle")


def linear_push(dummies, linear, differentiate):
    """The double-VJP trick's second half: `linear` holds g(u) = uᵀJ for the dummies u, so
    the derivative of g·v with respect to u is J·v. `differentiate(ys, xs, grad_ys)` is the
    backend's gradient. Returns `push([v_k]) -> [J_t·v per target t]`."""
    def push(tangents):
        found = pairs(linear, tangents)
        if found is None:
            return [None] * len(dummies)
        return [densify(g) for g in differentiate(found[0], dummies, found[1])]
    return push


def first_derivative(function, compute):
    """`compute()`: the first derivative a second-order function differentiates again. A
    DerivativeError when building it ran Python code (a tf.py_function's gradient):
    TensorFlow records nothing there, so the second derivative would silently be None, or
    miss that part. Eager code adds no op to the default graph, so nothing is found there;
    compat_grads runs it in a graph (`compile=True`, and the rows' loops), which this check
    sees."""
    graph = tf.compat.v1.get_default_graph()
    known = len(graph.get_operations())
    gradient = compute()
    found = python_op(graph.get_operations()[known:])
    if found is not None:
        error = DerivativeError(message(
            function, "the target runs Python code through tf.py_function, whose gradient "
            f"runs Python too ({found}): TensorFlow records nothing there, so it has no "
            "second derivative through it (it would give None, or leave that part out)",
            "Compute the target with TensorFlow ops, or give the Python code a gradient "
            "made of TensorFlow ops with tf.custom_gradient. First derivatives "
            "(stacked_jacobian, vjp) work as they are."))
        error.every_strategy = True  # no other strategy can help: none is tried
        raise error
    return gradient
