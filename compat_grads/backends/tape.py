"""TF2 world: `tf.GradientTape` for VJPs, `tf.autodiff.ForwardAccumulator` for JVPs.

A tensor target comes with the tape that recorded it; a callable target is run here, under
a tape or an accumulator, so that forward mode needs no reverse pass at all.
"""

import functools

from compat_grads._errors import ModeError, message
from compat_grads._structure import densify, linear_pairs
from compat_grads._tf import tf
from compat_grads.backends import Backend


class TapeBackend(Backend):
    """VJPs and JVPs of a recorded tensor, or of a callable run under the right recorder."""

    name = "tape"

    @functools.cached_property
    def _recorded(self):
        problem = self._problem
        if problem.fn is None:
            return problem.target, problem.tape
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(problem.flat)
            target = problem.call()
        return target, tape

    @property
    def target(self) -> tf.Tensor:
        return self._recorded[0]

    def vjp_fn(self):
        """`u -> [u·J_k for each source k]` (None where the target does not depend on x_k)."""
        (target, tape), flat = self._recorded, self._problem.flat

        def pull(cotangent):
            try:
                grads = tape.gradient(target, flat, output_gradients=cotangent)
            except NotImplementedError as err:
                raise ModeError(message(
                    self._problem.function, f"the tape cannot differentiate this target ({err})",
                    "In a graph (TF1 control flow) pass the target without tape=: "
                    "compat_grads then uses tf.gradients, which handles it.")) from err
            return [densify(g) for g in grads]
        return pull

    def jvp_fn(self):
        """`[v_k] -> sum_k J_k·v_k`: one forward pass for a callable, else the double VJP."""
        if self._problem.fn is not None:
            return self._accumulate
        return self._double_vjp()

    def _accumulate(self, tangents):
        pairs = [(x, v) for x, v in zip(self._problem.flat, tangents) if v is not None]
        with tf.autodiff.ForwardAccumulator(
                [x for x, _ in pairs], [v for _, v in pairs]) as accumulator:
            target = self._problem.call()
        return accumulator.jvp(target)

    def _double_vjp(self):
        # Same trick as the graph backend: record uᵀJ on an outer tape watching the dummy u.
        target = self.target
        dummy = tf.zeros_like(target)
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(dummy)
            linear = self.vjp_fn()(dummy)

        def push(tangents):
            pairs = linear_pairs(linear, tangents)
            return pairs and outer.gradient(pairs[0], dummy, output_gradients=pairs[1])
        return push

    @property
    def vjp_reusable(self) -> bool:
        """Whether `vjp_fn` can be traced again after a failed attempt (the tape survives)."""
        tape = self._problem.tape
        return tape is None or tape._persistent

    def cannot_vectorize(self):
        return None
