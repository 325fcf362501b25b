"""TF1 world: `tf.compat.v1.gradients` on a tensor in a graph (a TF1 graph, a v1 Graph in
TF2, or a `tf.function` body). Forward-mode products come from the double-VJP trick."""

import functools

from compat_grads._structure import densify, linear_pairs
from compat_grads._tf import tf
from compat_grads.backends import Backend

# TF1 (v1) control flow. pfor cannot vectorize gradients through it reliably: reverse mode
# through a v1 tf.cond builds but fails at run time ("Retval[0] does not have value").
_V1_CONTROL_FLOW = frozenset(
    {"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
     "NextIteration", "RefNextIteration", "LoopCond"})


class GraphBackend(Backend):
    """VJPs and JVPs of a graph tensor with `tf.compat.v1.gradients`."""

    name = "graph"
    vjp_reusable = True

    @functools.cached_property
    def target(self) -> tf.Tensor:
        problem = self._problem
        return problem.target if problem.fn is None else problem.call()

    @functools.cached_property
    def _sources(self):
        # A resource variable is differentiated through its handle. Inside a tf.function the
        # handle must be the graph's captured copy, resolved here, outside any loop body:
        # a while_loop body would capture it afresh and tf.gradients would return None.
        return [tf.convert_to_tensor(x.handle) if _is_resource_variable(x) else x
                for x in self._problem.flat]

    def vjp_fn(self):
        """`u -> [u·J_k for each source k]` (None where the target does not depend on x_k)."""
        target, sources = self.target, self._sources

        def pull(cotangent):
            grads = tf.compat.v1.gradients(target, sources, grad_ys=cotangent)
            return [densify(g) for g in grads]
        return pull

    def jvp_fn(self):
        """`[v_k] -> sum_k J_k·v_k` (None tangents are zero; None if nothing connects).

        The double-VJP trick: g(u) = uᵀJ is linear in u, so the gradient of g·v with respect
        to u is J·v. The dummy u only fixes shapes; its value never matters.
        """
        dummy = tf.zeros_like(self.target)
        linear = self.vjp_fn()(dummy)

        def push(tangents):
            pairs = linear_pairs(linear, tangents)
            return pairs and tf.compat.v1.gradients(pairs[0], dummy, grad_ys=pairs[1])[0]
        return push

    def cannot_vectorize(self):
        """Why pfor must not be used for this target (None when it may be)."""
        found = _find_op_types(self.target, _V1_CONTROL_FLOW, self._sources)
        return found and (f"the target uses TF1 control flow (a {found} op from tf.cond or "
                          f"tf.while_loop), which pfor cannot vectorize reliably")


def _is_resource_variable(x):
    return isinstance(x, tf.Variable) and hasattr(x, "handle")


def _find_op_types(target, types, stop_at):
    """The type of the first op of `types` among the ancestors of `target`, else None."""
    stop = {id(t.op) for t in stop_at if hasattr(t, "op")}
    seen, todo = set(), [target.op]
    while todo:
        op = todo.pop()
        if id(op) in seen or id(op) in stop:
            continue
        seen.add(id(op))
        if op.type in types:
            return op.type
        todo.extend(t.op for t in op.inputs)
    return None
