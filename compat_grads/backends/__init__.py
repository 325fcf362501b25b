"""The two backends. Each serves one `Problem` through the same few primitives:

- `target`: the target tensor (a callable target is run once, under the right recorder);
- `vjp_fn()`: a function `u -> [u·J_k per source]`, set up once, callable inside loops;
- `jvp_fn()`: a function `[v_k] -> sum_k J_k·v_k`, likewise;
- `cannot_vectorize()`: a reason pfor must not be tried, or None;
- `vjp_reusable`: whether `vjp_fn`'s function can be traced again after a failed attempt.

`compat_grads._jacobians` composes every public function from these.
"""

from compat_grads._structure import Problem


class Backend:
    """What both backends share: the problem they serve."""

    name = "abstract"

    def __init__(self, problem: Problem):
        self._problem = problem

    @property
    def function(self) -> str:
        """The public function being served, for error messages."""
        return self._problem.function
