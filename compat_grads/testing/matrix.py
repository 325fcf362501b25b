"""The matrix: every case × every public function that applies × every strategy."""

from __future__ import annotations

import dataclasses
import fnmatch

import numpy as np

import compat_grads as cg
from compat_grads._options import STRATEGIES
from compat_grads._tf import tf
from compat_grads.testing.cases import CASES, Case
from compat_grads.testing.modes import canonical

FIRST_ORDER = ("stacked_jacobian", "per_element_gradients", "batch_jacobian")
SECOND_ORDER = ("hessian", "batch_hessian")
TRANSFORMS = ("jvp", "vjp", "hvp")
FUNCTIONS = FIRST_ORDER + SECOND_ORDER + TRANSFORMS
_WITH_STRATEGY = ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian")
_BATCH = ("batch_jacobian", "batch_hessian")


@dataclasses.dataclass(frozen=True)
class Item:
    """One call to check: `function(case, strategy=..., unconnected_gradients=...)`."""

    case: Case
    function: str
    strategy: str | None = None
    unconnected: str = "none"
    independent: bool = True
    chunk_size: int | None = None

    @property
    def id(self) -> str:
        parts = [self.case.name, self.function, self.strategy, self.unconnected,
                 "" if self.independent else "exact",
                 "" if self.chunk_size is None else f"chunk{self.chunk_size}"]
        return "-".join(p for p in parts if p and p != "none")

    def __str__(self):
        return self.id

    def applies(self, route: str) -> bool:
        """jvp, vjp and hvp take callables only."""
        return self.function not in TRANSFORMS or route.endswith((".callable", ".uncompiled"))

    def expected_error(self, route: str):
        """The compat_grads exception `route` must raise, by name, or None if it must work.

        An eager tensor cannot give second order (in graphs the tape route passes the tensor
        alone, which works); the case lists the rest.
        """
        if self.function in SECOND_ORDER and route == "eager.tape":
            return "ModeError"
        if self.function in FIRST_ORDER and route in self.case.unsupported:
            return "ModeError"
        for item_glob, route_glob, error in self.case.fails:
            if fnmatch.fnmatch(self.id, item_glob) and fnmatch.fnmatch(route, route_glob):
                return error
        return None

    def structure(self, sources):
        """The structure the result must have."""
        if self.function == "hessian":
            return _nest_of_nests(sources)
        if self.function == "jvp":
            return (0, 0)
        if self.function == "vjp":
            return (0, sources)
        return sources

    def call(self, target, sources, tape=None, compile=True):
        function = getattr(cg, self.function)
        if self.function in TRANSFORMS:
            tangents, cotangent = self.case.direction_tensors()
            return function(target, sources, cotangent if self.function == "vjp" else tangents,
                            compile=compile)
        kwargs = {"unconnected_gradients": self.unconnected, "compile": compile}
        if self.chunk_size is not None:
            kwargs["chunk_size"] = self.chunk_size
        if self.function not in SECOND_ORDER:
            kwargs["tape"] = tape
        if self.strategy is not None:
            kwargs["strategy"] = self.strategy
        if self.function in _BATCH:
            kwargs["independent"] = self.independent
        return function(target, sources, **kwargs)


def _nest_of_nests(sources):
    flat = tf.nest.flatten(sources)
    return tf.nest.pack_sequence_as(
        sources, [tf.nest.pack_sequence_as(sources, flat) for _ in flat])


def _functions(case: Case):
    out = ["stacked_jacobian", "per_element_gradients", "jvp", "vjp"]
    if case.batched:
        out.append("batch_jacobian")
    if case.second_order:
        out.append("hessian")
        if case.scalar_target:
            out.append("hvp")
        if case.per_sample_scalar:
            out.append("batch_hessian")
    return out


CHUNKED = ("matmul_column", "mlp_tanh", "mlp_dynamic_batch", "nest_dict", "unconnected",
           "gather", "per_sample_hessian_3x2y_plus_y2_dynamic", "coupled_samples", "piecewise_cond",
           "elementwise_variables")
"""Cases that also run with chunk_size=3 (reverse, forward, loop): same values."""


def _variants(case: Case, function: str):
    strategies = STRATEGIES if function in _WITH_STRATEGY else (None,)
    modes = ("none", "zero") if case.unconnected and function not in TRANSFORMS else ("none",)
    independence = (False,) if case.coupled and function in _BATCH else (True,)
    out = [(s, u, i, None) for s in strategies for u in modes for i in independence]
    if function in _BATCH and not case.coupled:
        out.append(("auto", "none", False, None))
    if function in _WITH_STRATEGY and case.name in CHUNKED:
        out += [(s, "none", i, 3) for s in ("reverse", "forward", "loop") for i in independence]
    return out


def items(pattern: str | None = None) -> list:
    """All matrix items, or those whose id matches the glob / substring `pattern`."""
    return select([Item(case, function, s, u, independent, chunk)
                   for case in CASES for function in _functions(case)
                   for s, u, independent, chunk in _variants(case, function)], pattern)


def select(all_items: list, pattern: str | None) -> list:
    """The items whose id matches the glob (or, without wildcards, the substring)
    `pattern`; all of them when `pattern` is empty. An older spelling of a mode in `pattern`
    (`modes.ALIASES`: "v1graph") matches as the current one does."""
    if not pattern:
        return list(all_items)
    pattern = canonical(pattern)
    glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
    return [item for item in all_items if fnmatch.fnmatch(item.id, glob)]


QUICK_RULE = ("every case, every function with every strategy, both unconnected modes, "
              "chunk_size and independent=False at least once, each on every route")


def quick(selected: list) -> list:
    """The quick check's items among `selected`, in matrix order.

    The rule: walk `selected` cheapest first and keep an item when it covers something no
    kept item covers yet (`_coverage`: its case, by a function other than jvp / vjp / hvp,
    which take callables only; its function with its strategy; its function with
    unconnected_gradients="zero"; its function, and its strategy, with chunk_size; its
    function with independent=False). Cheapest means first-order before second-order, cases
    with static shapes and no pfor fallback first, then the fewest Jacobian entries, then
    the functions in `FUNCTIONS` order. Every kept item runs on every route that applies, so
    every function meets every route and every strategy.
    """
    return cover(selected, _coverage, _cheapness)


def cover(selected: list, coverage, cheapness) -> list:
    """Greedy cover: the items of `selected`, taken in order of `cheapness(item)`, that add
    a key of `coverage(item)` (a set) not covered before; returned in `selected`'s order."""
    kept, covered = set(), set()
    for item in sorted(selected, key=cheapness):
        if coverage(item) - covered:
            kept.add(item.id)
            covered |= coverage(item)
    return [item for item in selected if item.id in kept]


def _coverage(item: Item) -> set:
    f = item.function
    keys = {("function", f)}
    if f not in TRANSFORMS:  # a case is covered by a call that runs on every route
        keys.add(("case", item.case.name))
    if item.independent and item.chunk_size is None and item.unconnected == "none":
        keys.add(("strategy", f, item.strategy))
    if item.unconnected != "none":
        keys.add(("unconnected", f, item.unconnected))
    if item.chunk_size is not None:
        keys |= {("chunked", f), ("chunked", item.strategy)}
    if not item.independent:
        keys.add(("independent=False", f))
    return keys


def _cheapness(item: Item):
    sources, consts = item.case.inputs()
    y_size = np.size(item.case.numpy_fn(sources, consts))
    x_size = sum(np.size(x) for x in tf.nest.flatten(sources))
    order = 2 if item.function in SECOND_ORDER else 1
    slow = item.case.may_fall_back or item.case.dynamic_batch
    return order, slow, y_size * x_size ** order, FUNCTIONS.index(item.function), item.id
