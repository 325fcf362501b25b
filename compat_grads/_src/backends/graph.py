"""TF1 world: `tf.compat.v1.gradients` on tensors in a graph (a TF1 graph, a v1 Graph in TF2,
or a `tf.function` body). Forward-mode products come from the double-VJP trick."""

import functools

from compat_grads._src.backends import Backend, first_derivative, graph_sources, linear_push
from compat_grads._src.core.errors import DerivativeError, is_ours, last_line, message
from compat_grads._src.core.graph_walk import between
from compat_grads._src.core.python_ops import PYTHON_OP_TYPES, python_op
from compat_grads._src.core.structure import (
    densify,
    framework_cotangents,
    pairs,
    zeros_for_none,
)
from compat_grads._src.core.tf import tf

# TF1 (v1) control flow. pfor cannot vectorize gradients through it reliably: reverse mode
# through a v1 tf.cond builds but fails at run time ("Retval[0] does not have value").
_V1_LOOP = frozenset({"Enter", "RefEnter", "Exit", "RefExit", "NextIteration",
                      "RefNextIteration", "LoopCond"})
_V1_CONTROL_FLOW = _V1_LOOP | {"Switch", "RefSwitch", "Merge", "RefMerge"}


class GraphBackend(Backend):
    """VJPs and JVPs of graph tensors with `tf.compat.v1.gradients`."""

    name = "graph"
    vjp_reusable = True
    second_order_outer = "reverse"
    starts_inside = True

    def __init__(self, problem, sources=None):
        super().__init__(problem)
        # What tf.gradients differentiates with respect to, resolved here, where the call is
        # built, and handed down to the first derivative's backend (which may be built
        # inside a loop body): a loop body resolving them itself would capture its own copy
        # (of a variable's handle, of an eager tensor a tf.function captures), which the
        # target does not depend on, and tf.gradients would return None.
        self._sources = graph_sources(problem.flat) if sources is None else sources

    @functools.cached_property
    def _output(self):
        problem = self._problem
        return problem.target if problem.fn is None else problem.call()

    @property
    def outputs(self):
        return self._output

    @property
    def targets(self) -> list:
        return tf.nest.flatten(self._output)

    def vjp_fn(self, sources=None, targets=None):
        targets = self.targets if targets is None else targets
        sources = self._sources if sources is None else sources

        def pull(cotangents):
            ys, us = pairs(targets, cotangents)
            return [densify(g) for g in self._gradients(ys, sources, us)]
        return pull

    def jvp_fn(self):
        """The double-VJP trick: g(u) = uᵀJ is linear in u, so the gradient of g·v with respect
        to u is J·v. The dummy u only fixes shapes; its value never matters."""
        return self.push_from()

    def push_from(self, *tensors):
        """`jvp_fn` from tensors of the target's graph instead of the sources (all of them
        when none are given): `push([v per tensor]) -> [J_t·v per target]`."""
        dummies = [tf.zeros_like(t) for t in self.targets]
        return linear_push(dummies, self.vjp_fn(list(tensors) or None)(dummies),
                           functools.partial(self._gradients, second=True))

    def pull_from(self, *tensors):
        """`vjp_fn` from tensors of the target's graph instead of the targets:
        `pull([u per tensor]) -> [uᵀ·J per source]`."""
        return self.vjp_fn(targets=list(tensors))

    def linearize(self, tangents):
        return self._output, self.jvp_fn()(tangents)

    def linearize_symmetric(self, tangents):
        """Jᵀ·v = J·v by one more reverse pass, where the double-VJP trick takes two: the
        HVP a TF1 program builds with two tf.gradients calls, op for op (a third fewer ops
        and faster runs than forward-over-reverse there)."""
        return self._output, self.vjp_fn()(tangents)

    def vjp_backend(self, cotangents_of):
        cotangents = cotangents_of(self.targets)  # the forward pass is built here
        grads = first_derivative(self.function, lambda: self.vjp_fn()(cotangents))
        return GraphBackend(self._derived(target=zeros_for_none(grads, self._problem.flat),
                                          fn=None), self._sources)

    def differentiated(self) -> list:
        return self._sources

    def path_ops(self) -> list:
        """The ops between the sources as tf.gradients sees them (handles, captured copies)
        and the targets: walked once per backend."""
        return self._path_ops

    @functools.cached_property
    def _path_ops(self):
        return between(self.targets, self._sources)

    def cannot_vectorize(self):
        """Why pfor must not be used for these targets (None when it may be)."""
        found = next(iter(self._v1_control_flow.values()), None)
        return found and (f"the target uses TF1 control flow (a {found.type} op from tf.cond "
                          f"or tf.while_loop), which pfor cannot vectorize reliably")

    def forward_per_row(self):
        """Why each row must run the forward pass again (None when it need not): TF1
        cannot build the gradient of a tf.while_loop inside another loop, but it can build
        the loop and its gradient together inside one."""
        found = next((op for kind, op in self._v1_control_flow.items() if kind in _V1_LOOP),
                     None)
        return found and (f"the target runs a TF1 tf.while_loop (its {found.type} op "
                          f"'{found.name}'), whose gradient TensorFlow cannot build inside "
                          "another loop")

    @functools.cached_property
    def _v1_control_flow(self):
        # A walk over the ops tf.gradients differentiates: once per backend, not per stack.
        # The loop the call is built inside (the body of the user's own tf.while_loop) is
        # not one the target runs: its Enter ops only bring outside tensors in.
        inside = _enclosing_contexts()
        found = {}
        for op in self.path_ops():
            if op.type in _V1_CONTROL_FLOW and id(op._get_control_flow_context()) not in inside:
                found.setdefault(op.type, op)
        return found

    def _gradients(self, ys, xs, grad_ys, second=False):
        """`tf.gradients`; what TensorFlow cannot build is a DerivativeError. `second`: the
        gradient of a gradient (forward mode by the double-VJP trick)."""
        try:
            return tf.compat.v1.gradients(ys, xs, grad_ys=framework_cotangents(grad_ys))
        except (TypeError, ValueError, LookupError, NotImplementedError) as err:
            if is_ours(err):
                raise
            raise self._cannot(err, second or self._problem.order > 1) from err

    def _cannot(self, err, second):
        found = f"{type(err).__name__}: {last_line(err)}"
        python = python_op(op for op in _ancestors(self.targets, self._sources)  # nested
                           if op.type not in PYTHON_OP_TYPES)
        if python is not None:  # tf.gradients fails the same way on it, alone
            return DerivativeError(message(
                self.function, f"TensorFlow could not differentiate this target ({found}): "
                f"it runs Python code through tf.py_function ({python}), which TensorFlow "
                "cannot differentiate there (inside a tf.function called from a v1 Graph, "
                "tf.gradients fails the same way)", "Call tf.py_function outside the "
                "tf.function, or run this code the TF2 way (eagerly or inside a "
                "tf.function), where compat_grads differentiates it."))
        if not second:
            return DerivativeError(message(
                self.function, f"TensorFlow could not differentiate this target ({found})",
                "Every op between the sources and the target needs a gradient: compute the "
                "target with differentiable ops."))
        return DerivativeError(message(
            self.function, "TensorFlow could not differentiate the gradient of this target, "
            f"which this call needs (a second derivative, or forward mode, which a graph "
            f"computes as the gradient of a gradient: {found})", "A TF1 tf.while_loop has "
            "no second derivative: use first-order reverse mode (stacked_jacobian or "
            "batch_jacobian with strategy='reverse', or vjp; per-element gradients are the "
            "Jacobian summed over the source's axes), or run it in TF2 (control flow v2)."))


def _enclosing_contexts():
    """The ids of the v1 control flow contexts the default graph is building in (a
    tf.while_loop body, a tf.cond branch, and those around them)."""
    context = tf.compat.v1.get_default_graph()._get_control_flow_context()
    found = set()
    while context is not None:
        found.add(id(context))
        context = context.outer_context
    return found


def _ancestors(targets, stop_at):
    """The ops `targets` are computed by, up to the ops that make `stop_at`."""
    stop = {id(t.op) for t in stop_at if hasattr(t, "op")}
    seen, todo = set(), [t.op for t in targets]
    while todo:
        op = todo.pop()
        if id(op) in seen or id(op) in stop:
            continue
        seen.add(id(op))
        yield op
        todo.extend(t.op for t in op.inputs)
