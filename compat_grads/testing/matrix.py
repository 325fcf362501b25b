"""The matrix: every case × every public function that applies × every strategy."""

from __future__ import annotations

import collections
import dataclasses
import fnmatch
import functools

import numpy as np

import compat_grads as cg
from compat_grads._src.call.options import STRATEGIES
from compat_grads._src.core.tf import tf
from compat_grads.testing.cases import CASES, Case
from compat_grads.testing.modes import TF1, XLA, canonical

FIRST_ORDER = ("stacked_jacobian", "per_element_gradients", "batch_jacobian")
SECOND_ORDER = ("hessian", "batch_hessian")
TRANSFORMS = ("jvp", "vjp", "hvp")
SECOND_ORDER_TRACES = ("hessian_diagonal", "laplacian", "batch_hessian_diagonal",
                       "batch_laplacian")
TRACES = (*SECOND_ORDER_TRACES, "divergence", "batch_divergence")
"""Diagonals and traces: second order without a tape (as SECOND_ORDER), and the divergences,
first order with one (as FIRST_ORDER)."""
FUNCTIONS = FIRST_ORDER + SECOND_ORDER + TRANSFORMS + TRACES
_WITH_STRATEGY = ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian", *TRACES)
_BATCH = ("batch_jacobian", "batch_hessian", "batch_hessian_diagonal", "batch_laplacian")
_TAPE = (*FIRST_ORDER, "divergence", "batch_divergence")
FLAT = ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian")
"""The functions with `flat=True`: every other of their items (by case and strategy) runs
flat, so each case, route and strategy meets both forms."""
CALLABLE_KINDS = ("callable", "uncompiled")
"""The route kinds whose target is a callable: there every item runs with has_aux=True."""


def with_aux(build):
    """The callable target of a matrix item with has_aux=True: `(y, {"twice": y + y})`
    (doubling is exact in every float dtype, so the oracle of aux is twice the value's)."""
    def target(sources):
        y = build(sources)
        return y, {"twice": y + y}
    return target


def callable_route(route: str) -> bool:
    return route.rsplit(".", 1)[-1] in CALLABLE_KINDS


def derivative_values(function: str, route: str, values: list) -> list:
    """A route's flat result values without the value and aux: what the function returned
    before `return_value` and `has_aux` (jvp's and vjp's outputs included)."""
    values = without_aux(function, route, values)
    return values if function in ("jvp", "vjp") else values[1:]


def without_aux(function: str, route: str, values: list) -> list:
    """A route's flat result values without the aux (which tensor routes do not return), so
    every route's results line up: the value, then the derivative."""
    if not callable_route(route):
        return values
    at = len(values) - 1 if function in ("jvp", "vjp") else 1
    return values[:at] + values[at + 1:]


@dataclasses.dataclass(frozen=True)
class Item:
    """One call to check: `function(case, strategy=..., unconnected_gradients=...)`.

    Every call returns the value with the derivative (`return_value=True`) and, with a
    callable target, the aux too (`has_aux=True`, `with_aux`): the value and aux are checked
    against the oracle like the derivative. jvp and vjp have outputs already and take
    `has_aux` only. `flat`: the derivative as one matrix (`flat=True`).
    """

    case: Case
    function: str
    strategy: str | None = None
    unconnected: str = "none"
    independent: bool = True
    chunk_size: int | None = None
    flat: bool = False

    @property
    def id(self) -> str:
        parts = [self.case.name, self.function, self.strategy, self.unconnected,
                 "" if self.independent else "exact",
                 "" if self.chunk_size is None else f"chunk{self.chunk_size}",
                 "flat" if self.flat else ""]
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
        if self.function not in _TAPE and route == "eager.tape":
            return "ModeError"
        if self.function in _TAPE and route in self.case.unsupported:
            return "ModeError"
        for item_glob, route_glob, error in self.case.fails:
            if fnmatch.fnmatch(self.id, item_glob) and fnmatch.fnmatch(route, route_glob):
                return error
        return None

    def structure(self, sources, with_aux: bool):
        """The structure the result must have (`with_aux`: a callable target's)."""
        aux = {"twice": 0}
        if self.function in ("jvp", "vjp"):
            return (0, 0 if self.function == "jvp" else sources, aux)
        derivative = 0 if self.flat or self.function in TRACES[1:] else (
            _nest_of_nests(sources) if self.function == "hessian" else sources)
        return ((0, aux) if with_aux else 0), derivative

    def call(self, target, sources, tape=None, compile=True, jit_compile=False):
        function = functools.partial(getattr(cg, self.function), jit_compile=jit_compile)
        has_aux = callable(target) and not tf.is_tensor(target)
        if has_aux:
            target = with_aux(target)
        if self.function in ("jvp", "vjp"):
            tangents, cotangent = self.case.direction_tensors()
            return function(target, sources, cotangent if self.function == "vjp" else tangents,
                            compile=compile, has_aux=True)
        if self.function == "hvp":
            tangents, _ = self.case.direction_tensors()
            return function(target, sources, tangents, compile=compile, has_aux=True,
                            return_value=True)
        kwargs = {"unconnected_gradients": self.unconnected, "compile": compile,
                  "has_aux": has_aux, "return_value": True}
        if self.flat:
            kwargs["flat"] = True
        if self.chunk_size is not None:
            kwargs["chunk_size"] = self.chunk_size
        if self.function in _TAPE:
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
        if case.scalar_target:
            out += ["hessian_diagonal", "laplacian"]
        if case.per_sample_scalar:
            out += ["batch_hessian", "batch_hessian_diagonal", "batch_laplacian"]
    if case.square:
        out.append("divergence")
        if case.batched and not case.coupled:
            out.append("batch_divergence")
    return out


CHUNKED = ("matmul_column", "mlp_tanh", "mlp_dynamic_batch", "nest_dict", "unconnected",
           "gather", "per_sample_hessian_3x2y_plus_y2_dynamic", "coupled_samples", "piecewise_cond",
           "elementwise_variables")
"""Cases that also run with chunk_size=3: same values. A function with a strategy runs one
explicit strategy chunked on each of these cases, by turns over the chunked cases it meets
(`_chunked_strategies`), so each strategy meets it chunked on several cases; a function
that meets fewer than three of them runs every strategy chunked there."""
_CHUNK_STRATEGIES = ("reverse", "forward", "loop")


@functools.cache
def _chunked_strategies(case_name: str, function: str) -> tuple:
    """The explicit strategies `function` runs with chunk_size=3 on the chunked case
    `case_name` (see CHUNKED)."""
    met = [c.name for c in CASES if c.name in CHUNKED and function in _functions(c)]
    if len(met) < len(_CHUNK_STRATEGIES):
        return _CHUNK_STRATEGIES
    return (_CHUNK_STRATEGIES[met.index(case_name) % len(_CHUNK_STRATEGIES)],)


def _variants(case: Case, function: str, turn: int = 0):
    if function in TRACES:
        return _trace_variants(case, function, turn)
    strategies = STRATEGIES if function in _WITH_STRATEGY else (None,)
    modes = ("none", "zero") if case.unconnected and function not in TRANSFORMS else ("none",)
    independence = (False,) if case.coupled and function in _BATCH else (True,)
    out = [(s, u, i, None) for s in strategies for u in modes for i in independence]
    if function in _BATCH and not case.coupled:
        out.append(("auto", "none", False, None))
    if function in _WITH_STRATEGY and case.name in CHUNKED:
        out += [(s, "none", i, 3) for s in _chunked_strategies(case.name, function)
                for i in independence]
    return out


def _trace_variants(case: Case, function: str, turn: int):
    """The diagonals and traces: "auto" and, by turns over the cases it meets (`turn`), one
    explicit strategy (every strategy meets every function on several cases, at a third of
    the items); "zero", independent=False and chunk_size once each where they apply."""
    explicit = STRATEGIES[1 + turn % 3]
    independence = (False,) if case.coupled and function in _BATCH else (True,)
    out = [(s, "none", i, None) for s in ("auto", explicit) for i in independence]
    if case.unconnected:
        out.append(("auto", "zero", independence[0], None))
    if function in _BATCH and not case.coupled:
        out.append(("auto", "none", False, None))
    if case.name in CHUNKED:
        out.append((explicit, "none", independence[0], 3))
    return out


def items(pattern: str | None = None) -> list:
    """All matrix items, or those whose id matches the glob / substring `pattern`."""
    turns = {}  # per function, how many cases it has met: whose turn each strategy is

    def variants(case, function):
        turns[function] = turns.get(function, -1) + 1
        return _variants(case, function, turns[function])
    return select([Item(case, function, s, u, independent, chunk, _flat(c, function, s))
                   for c, case in enumerate(CASES) for function in _functions(case)
                   for s, u, independent, chunk in variants(case, function)], pattern)


def _flat(case_index: int, function: str, strategy: str | None) -> bool:
    return function in FLAT and (case_index + STRATEGIES.index(strategy)) % 2 == 1


def select(all_items: list, pattern: str | None) -> list:
    """The items whose id matches the glob (or, without wildcards, the substring)
    `pattern`; all of them when `pattern` is empty. An older spelling of a mode in `pattern`
    (`modes.ALIASES`: "v1graph") matches as the current one does."""
    if not pattern:
        return list(all_items)
    pattern = canonical(pattern)
    glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
    return [item for item in all_items if fnmatch.fnmatch(item.id, glob)]


def route_plan(selected: list, routes, full: bool = False) -> dict:
    """{item id: the routes of `routes` it runs}, for the items `selected` (in order).

    With `full`, every route that applies. Otherwise every item runs every mode of `routes`:
    the TF1 graph on tensor (the route every other is compared with bit for bit) plus one of
    its others, and eager, a v1 Graph and tf.function on one of theirs each; XLA
    (`jit_compile=True`, each call compiled anew) runs on the quick check's items (`quick`),
    which meet every case, function and strategy. The turn goes to the applicable route
    that the item's case, function or strategy has met least (ties: the case's count, then
    the function's, the strategy's, the order of `routes`), so each of them meets every
    route (eager's three ways in among them: compiled, uncompiled and with a tape); the
    routes of a mode are not all run again for every item. The plan of an item does not
    depend on which other items run after it: `selected` is the whole matrix, and
    `pytest -k` picks from the plan.
    """
    by_mode = collections.defaultdict(list)
    for route in routes:
        by_mode[route.split(".")[0]].append(route)
    covered = {item.id for item in quick(selected)} if XLA in by_mode and not full else set()
    met = collections.Counter()
    plan = {}
    for item in selected:
        chosen = []
        for mode, mode_routes in by_mode.items():
            applicable = [r for r in mode_routes if item.applies(r)]
            if full or (mode == XLA and item.id in covered):
                chosen += applicable
                continue
            if mode == XLA:
                continue
            fixed = [r for r in applicable if mode == TF1 and r.endswith(".tensor")]
            rest = [r for r in applicable if r not in fixed]
            keys = (("case", item.case.name), ("function", item.function),
                    ("strategy", item.strategy))
            chosen += fixed + ([_take_turn(rest, keys, met)] if rest else [])
        plan[item.id] = tuple(chosen)
    return plan


def cover_plan(selected: list, routes, reference: str | None = None) -> dict:
    """{item id: the routes of `routes` it runs}: the fewest runs in which every case,
    function and strategy still meets every route that applies to it (as in `route_plan`),
    for a release other than the newest in CI (`COMPAT_GRADS_MATRIX=cover`).

    Every item runs once: on `reference` where it applies (the route every other is compared
    with bit for bit), otherwise on one route by turns (as in `route_plan`); XLA only on the
    quick check's items. Then, cheapest items first (`quick`'s order), an item runs a route
    too where its case, function or strategy has not met that route yet. On the matrix of
    584 items that is 620 TF2 runs where `route_plan` makes 1,853, and 647 TF1 runs where it
    makes 1,090.
    """
    covered = {item.id for item in quick(selected)}

    def applicable(item):
        return [r for r in routes if item.applies(r)
                and (not r.startswith(XLA + ".") or item.id in covered)]

    def keys(item):
        return (("case", item.case.name), ("function", item.function),
                ("strategy", item.strategy))

    met = collections.Counter()
    plan = {}
    for item in selected:
        own = applicable(item)
        plan[item.id] = ([] if not own else [reference] if reference in own
                         else [_take_turn(own, keys(item), met)])
    seen = {(key, route) for item in selected for key in keys(item) for route in plan[item.id]}
    for item in sorted(selected, key=_cheapness):
        for route in applicable(item):
            if route not in plan[item.id] and any((k, route) not in seen for k in keys(item)):
                plan[item.id].append(route)
                seen.update((k, route) for k in keys(item))
    return {item.id: tuple(plan[item.id]) for item in selected}


def _take_turn(candidates: list, keys, met: collections.Counter):
    """The one of `candidates` (routes, or modes) that the `keys` of an item have met least:
    the fewest meetings of any key, then of each key in order, then `candidates`' order.
    It is counted in `met` as met by them."""
    turn = min(candidates, key=lambda c: (min(met[k, c] for k in keys),
                                          [met[k, c] for k in keys], candidates.index(c)))
    met.update((k, turn) for k in keys)
    return turn


def check_plan(selected: list, routes) -> dict:
    """{item id: the routes of `routes` it runs} in the quick check (`compat-grads check`).

    Every item runs in the TF1 graph, on its first route of `routes` that applies and works
    (`_working`: the tensor route, which every other route is compared with, bit for bit
    where it runs the same algorithm; jvp, vjp and hvp take callables), and in one TF2 mode
    of `routes` (v1 Graph, tf.function, eager) on one of its working routes (an eager tensor
    gives no second order): the mode that the item's function, then its case and strategy,
    have met least, and in it the route they have met least (as in `route_plan`). So every
    function meets every mode, with one TF2 route per item instead of all ten; a function
    with fewer items in `selected` than there are TF2 modes runs each of its items in every
    mode.
    """
    by_mode = collections.defaultdict(list)
    for route in routes:
        by_mode[route.split(".")[0]].append(route)
    tf1_routes = by_mode.pop(TF1, [])
    items_of = collections.Counter(item.function for item in selected)
    met = collections.Counter()
    plan = {}
    for item in selected:
        keys = (("function", item.function), ("case", item.case.name),
                ("strategy", item.strategy))
        applicable = {mode: _working(item, mode_routes) for mode, mode_routes in by_mode.items()}
        modes = [m for m in by_mode if applicable[m]]
        if items_of[item.function] >= len(by_mode):
            modes = [_take_turn(modes, keys, met)]
        plan[item.id] = (*_working(item, tf1_routes)[:1],
                         *(_take_turn(applicable[m], keys, met) for m in modes))
    return plan


def _working(item: Item, routes) -> list:
    """The routes of `routes` that apply to `item` and where it must work (give a value to
    hold to the oracle, not an expected error); those that apply if there are none."""
    applicable = [r for r in routes if item.applies(r)]
    return [r for r in applicable if not item.expected_error(r)] or applicable


QUICK_RULE = ("every case, every function with every strategy, both unconnected modes, "
              "chunk_size, independent=False and flat=True at least once, each in the TF1 "
              "graph and a TF2 mode, every function in every mode")


def quick(selected: list) -> list:
    """The quick check's items among `selected`, in matrix order.

    The rule: walk `selected` cheapest first and keep an item when it covers something no
    kept item covers yet (`_coverage`: its case, by a function other than jvp / vjp / hvp,
    which take callables only; its function with its strategy; its function with
    unconnected_gradients="zero"; its function, and its strategy, with chunk_size; its
    function with independent=False). Cheapest means first-order before second-order, cases
    with static shapes and no pfor fallback first, then the fewest Jacobian entries, then
    the functions in `FUNCTIONS` order. `compat-grads check` runs every kept item in the TF1
    graph and in one TF2 mode by turns (`check_plan`), so every function meets every mode.
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
    if item.flat:
        keys |= {("flat", f), ("flat", item.strategy)}
    return keys


def _cheapness(item: Item):
    sources, consts = item.case.inputs()
    y_size = np.size(item.case.numpy_fn(sources, consts))
    x_size = sum(np.size(x) for x in tf.nest.flatten(sources))
    order = 2 if item.function in SECOND_ORDER + SECOND_ORDER_TRACES else 1
    slow = item.case.may_fall_back or item.case.dynamic_batch
    return order, slow, y_size * x_size ** order, FUNCTIONS.index(item.function), item.id
