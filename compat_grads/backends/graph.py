"""TF1 world: `tf.compat.v1.gradients` on tensors in a graph (a TF1 graph, a v1 Graph in TF2,
or a `tf.function` body). Forward-mode products come from the double-VJP trick."""

import functools

from compat_grads._structure import densify, pairs, zeros_for_none
from compat_grads._tf import tf
from compat_grads.backends import Backend, linear_push

# TF1 (v1) control flow. pfor cannot vectorize gradients through it reliably: reverse mode
# through a v1 tf.cond builds but fails at run time ("Retval[0] does not have value").
_V1_CONTROL_FLOW = frozenset(
    {"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
     "NextIteration", "RefNextIteration", "LoopCond"})


class GraphBackend(Backend):
    """VJPs and JVPs of graph tensors with `tf.compat.v1.gradients`."""

    name = "graph"
    vjp_reusable = True
    second_order_outer = "reverse"

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

    @functools.cached_property
    def _sources(self):
        # A resource variable is differentiated through its handle. Inside a tf.function the
        # handle must be the graph's captured copy, resolved here, outside any loop body:
        # a while_loop body would capture it afresh and tf.gradients would return None.
        return [tf.convert_to_tensor(x.handle) if _is_resource_variable(x) else x
                for x in self._problem.flat]

    def vjp_fn(self):
        targets, sources = self.targets, self._sources

        def pull(cotangents):
            ys, us = pairs(targets, cotangents)
            return [densify(g) for g in tf.compat.v1.gradients(ys, sources, grad_ys=us)]
        return pull

    def jvp_fn(self):
        """The double-VJP trick: g(u) = uᵀJ is linear in u, so the gradient of g·v with respect
        to u is J·v. The dummy u only fixes shapes; its value never matters."""
        dummies = [tf.zeros_like(t) for t in self.targets]
        return linear_push(dummies, self.vjp_fn()(dummies), tf.compat.v1.gradients)

    def linearize(self, tangents):
        return self._output, self.jvp_fn()(tangents)

    def vjp_backend(self, cotangents_of):
        grads = self.vjp_fn()(cotangents_of(self.targets))
        return GraphBackend(self._derived(target=zeros_for_none(grads, self._problem.flat),
                                          fn=None))

    def cannot_vectorize(self):
        """Why pfor must not be used for these targets (None when it may be)."""
        return self._unvectorizable

    @functools.cached_property
    def _unvectorizable(self):
        # A walk over every ancestor of the targets: once per backend, not once per stack.
        found = _find_op_types(self.targets, _V1_CONTROL_FLOW, self._sources)
        return found and (f"the target uses TF1 control flow (a {found} op from tf.cond or "
                          f"tf.while_loop), which pfor cannot vectorize reliably")


def _is_resource_variable(x):
    return isinstance(x, tf.Variable) and hasattr(x, "handle")


def _find_op_types(targets, types, stop_at):
    """The type of the first op of `types` among the ancestors of `targets`, else None."""
    stop = {id(t.op) for t in stop_at if hasattr(t, "op")}
    seen, todo = set(), [t.op for t in targets]
    while todo:
        op = todo.pop()
        if id(op) in seen or id(op) in stop:
            continue
        seen.add(id(op))
        if op.type in types:
            return op.type
        todo.extend(t.op for t in op.inputs)
    return None
