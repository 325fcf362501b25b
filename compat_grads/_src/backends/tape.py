"""TF2 world: `tf.GradientTape` for VJPs, `tf.autodiff.ForwardAccumulator` for JVPs.

A tensor target comes with the tape that recorded it; a callable target is run here, under
a tape or an accumulator, so that forward mode needs no reverse pass at all.
"""

import functools

from compat_grads._src.backends import Backend, first_derivative, linear_push
from compat_grads._src.core.errors import ModeError, message
from compat_grads._src.core.structure import (
    densify,
    framework_cotangents,
    pairs,
    zeros_for_none,
)
from compat_grads._src.core.tf import tf


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
            output = problem.call()
        return output, tape

    @property
    def outputs(self):
        return self._recorded[0]

    @property
    def targets(self) -> list:
        return tf.nest.flatten(self._recorded[0])

    def vjp_fn(self):
        (output, tape), flat = self._recorded, self._problem.flat
        targets = tf.nest.flatten(output)

        def pull(cotangents):
            ys, us = pairs(targets, cotangents)
            try:
                grads = tape.gradient(ys, flat, output_gradients=framework_cotangents(us))
            except NotImplementedError as err:
                raise ModeError(message(
                    self.function, f"the tape cannot differentiate this target ({err})",
                    "In a graph (TF1 control flow) pass the target without tape=: "
                    "compat_grads then uses tf.gradients, which handles it.")) from err
            return [densify(g) for g in grads]
        return pull

    def jvp_fn(self):
        """One forward pass per product for a callable, else the double-VJP trick."""
        if self._problem.fn is not None:
            return lambda tangents: self.linearize(tangents)[1]
        return self._double_vjp()

    def linearize(self, tangents):
        if self._problem.fn is None:
            return self._recorded[0], self._double_vjp()(tangents)
        primals, vectors = _merged(*(pairs(self._problem.flat, tangents) or ([], [])))
        with tf.autodiff.ForwardAccumulator(primals, vectors) as accumulator:
            output = self._problem.call()
        return output, [densify(accumulator.jvp(t)) for t in tf.nest.flatten(output)]

    def _double_vjp(self):
        # Same trick as the graph backend: record uᵀJ on an outer tape watching the dummies u.
        dummies = [tf.zeros_like(t) for t in self.targets]
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(dummies)
            linear = self.vjp_fn()(dummies)
        return linear_push(dummies, linear, outer.gradient)

    def vjp_backend(self, cotangents_of):
        problem = self._problem

        def gradient_of(sources):
            inner = TapeBackend(self._derived(fn=problem.fn, flat=tf.nest.flatten(sources),
                                              nested_target=problem.nested_target))
            cotangents = cotangents_of(inner.targets)  # the forward pass runs here
            grads = first_derivative(self.function, lambda: inner.vjp_fn()(cotangents))
            return zeros_for_none(grads, inner._problem.flat)
        return TapeBackend(self._derived(fn=gradient_of, target=None))

    @property
    def second_order_outer(self) -> str:
        """Forward-over-reverse when the callable can be run under an accumulator."""
        return "forward" if self._problem.fn is not None else "reverse"

    @property
    def vjp_reusable(self) -> bool:
        """Whether `vjp_fn` can be traced again after a failed attempt (the tape survives)."""
        tape = self._problem.tape
        return tape is None or tape._persistent

    def cannot_vectorize(self):
        return None


def _merged(primals, tangents):
    """A source given twice (`[x, x]`) is one primal, with the sum of its tangents: each
    occurrence gets the total derivative (ForwardAccumulator refuses a primal twice)."""
    merged = {}
    for primal, tangent in zip(primals, tangents):
        if id(primal) in merged:
            tangent = merged[id(primal)][1] + tangent
        merged[id(primal)] = (primal, tangent)
    return [p for p, _ in merged.values()], [t for _, t in merged.values()]
