"""`has_aux=` and `return_value=`: the value (and auxiliary outputs) of a callable target,
taken from the pass that computes the derivative.

The call path (`compat_grads._src.call.run`) hands the computation a `Capture` in place of the
user's callable. Each call of it runs the callable, splits off `aux` (with `has_aux`) and
records `(y, aux)` when the call is one whose tensors the caller can use: not inside the
rows' loop (`compat_grads._src.stacking.row_calls` marks those) and in the graph the call
path runs in (not in a function traced inside it). Every derivative the library composes
reads its target at that level at least once (for its shape, its size or the forward pass
under a tape or an accumulator), so the value costs no extra call of the callable; only where
no such call was made does `value` run the callable once more.
"""

from __future__ import annotations

from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.structure import leaf_paths
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable
from compat_grads._src.stacking.row_calls import inside_rows


class Capture:
    """The callable target `f` as the computation calls it: `f` itself with `aux` split off,
    and the first usable `(y, aux)` kept.

    `__wrapped__` is `f`, for the checks that look at the model behind the callable."""

    is_capture = True

    def __init__(self, function: str, f, has_aux: bool):
        self.function, self.__wrapped__, self.has_aux = function, f, has_aux
        # The graph being built when the call path started (eager code has its own): a call
        # made in another one (a function traced inside) leaves tensors the caller cannot use.
        self._graph, self._records = tf.compat.v1.get_default_graph(), []
        self.last = None
        """`(y, aux)` of the latest call, wherever it was made (a row's own pass)."""

    def __call__(self, *args, **kwargs):
        out = self.__wrapped__(*args, **kwargs)
        y, aux = split_aux(self.function, out) if self.has_aux else (out, None)
        if self.has_aux:
            _check_aux(self.function, aux)
        self.last = (y, aux)
        if not inside_rows() and tf.compat.v1.get_default_graph() is self._graph:
            self._records.append((y, aux))
        return y

    def first(self):
        """`(y, aux)` of the first usable call (None before one)."""
        return self._records[0] if self._records else None

    def value(self, sources):
        """`(y, aux)` from the first usable call; `f(sources)` once more when there was
        none."""
        if not self._records:
            self(sources)
        y, aux = self._records[0]
        # A variable returned as it is would be live: later assignments would change it.
        variable = isinstance(unwrap_variable(y), tf.Variable)
        return (tf.convert_to_tensor(unwrap_variable(y)) if variable else y), aux


def split_aux(function: str, out):
    """`(y, aux)` from what a `has_aux=True` callable returned."""
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return out[0], out[1]
    raise TypeError(message(
        function, f"with has_aux=True the callable must return a pair (y, aux), but it "
        f"returned {_returned(out)}",
        "Return `y, aux` (aux: any nest of tensors, not differentiated), or drop "
        "has_aux=True."))


def _check_aux(function: str, aux) -> None:
    """aux is a nest of tensors (it may leave a compiled function) or None."""
    for path, leaf in zip(leaf_paths(aux, "aux"), tf.nest.flatten(aux)):
        if leaf is not None and not tf.is_tensor(leaf) and not isinstance(
                unwrap_variable(leaf), tf.Variable):
            raise TypeError(message(
                function, f"with has_aux=True the aux must be a nest of tensors, but {path} "
                f"is {describe(leaf)}",
                "Return it as a tensor (tf.constant(...)), or keep it out of aux: it may "
                "leave a compiled tf.function, which returns tensors only."))


def _returned(out) -> str:
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)}"
    return describe(out)


def no_aux_for_tensor(function: str, target, argument: str = "target") -> None:
    """has_aux needs a callable: a tensor target has nothing to split."""
    raise TypeError(message(
        function, f"has_aux=True needs a callable {argument} f(sources) -> (y, aux), but "
        f"{argument} is {describe(target)}",
        "Pass the callable, or drop has_aux=True and compute the auxiliary outputs "
        "yourself (a tensor target is its own value: return_value=True returns it)."))


def assemble(options, value, aux, derivative):
    """The public result: `(y, derivative)` with `return_value`, `(derivative, aux)` with
    `has_aux`, `((y, aux), derivative)` with both."""
    if options.return_value and options.has_aux:
        return (value, aux), derivative
    if options.return_value:
        return value, derivative
    return derivative, aux


def derivative_of(options, result):
    """The derivative part of an assembled result."""
    if not (options.return_value or options.has_aux):
        return result
    return result[1] if options.return_value else result[0]


def with_derivative(options, result, derivative):
    """`result` with its derivative part replaced."""
    if not (options.return_value or options.has_aux):
        return derivative
    return (result[0], derivative) if options.return_value else (derivative, result[1])


def check_sample_aux(function: str, aux, why: str, batch=None) -> None:
    """Aux joined or stacked per sample (`why`): each leaf must be a tensor whose first axis
    is the batch (`batch` samples, when known statically); None leaves stay None."""
    for path, leaf in zip(leaf_paths(aux, "aux"), tf.nest.flatten(aux)):
        if leaf is None:
            continue
        first = tf.compat.dimension_value(leaf.shape[0]) if leaf.shape.rank else None
        if leaf.shape.rank == 0 or (None not in (first, batch) and first != batch):
            got = "rank 0" if leaf.shape.rank == 0 else (
                f"shape {leaf.shape} for {batch} sample{'s' if batch != 1 else ''}")
            raise ValueError(message(
                function, f"{why}, so every aux leaf must have the batch axis first, but "
                f"{path} has {got}",
                "Return per-sample aux (e.g. the per-sample losses, not their mean), or "
                "compute the aux outside this call."))
