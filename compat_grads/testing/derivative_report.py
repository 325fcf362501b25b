"""What `check_derivatives` found: one `DerivativeRow` per (function, mode, strategy), in a
`DerivativeReport`, laid out as `compare_port`'s `PortReport` is (failing rows first, a
table, `assert_ok()`, `to_dict()`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compat_grads.testing.port_report import at_index, table

__all__ = ["DerivativeReport", "DerivativeRow", "compare", "NO_STRATEGY"]

NO_STRATEGY = "-"
"""The strategy of a row whose function takes no `strategy=` (jvp, vjp, hvp, ...)."""


@dataclasses.dataclass
class DerivativeRow:
    """`function` of the user's f, run in `mode` with `strategy`, against float64 central
    differences of f and against the other routes of the same function.

    `max_abs_error` is `max|route - differences|`, `max_rel_error` that over `|differences|`
    where they are not zero, `route_difference` `max|route - median of all routes|`;
    `worst` is the index of the worst element (`"[2, 1]"`, with the block first when the
    result has several: `"1: [2, 1]"`). `reason` says why a row is not ok.
    """

    function: str
    mode: str
    strategy: str = NO_STRATEGY
    shape: tuple | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    route_difference: float | None = None
    worst: str = ""
    ok: bool = False
    reason: str = ""
    rtol: float | None = None
    atol: float | None = None

    @property
    def route(self) -> str:
        """The mode, and the strategy where the function has one: "xla (strategy=forward)"."""
        return self.mode + ("" if self.strategy == NO_STRATEGY
                            else f" (strategy={self.strategy})")


def compare(actual: list, expected: list, labels: list, tolerance: tuple) -> dict:
    """Row fields for blocks `actual` against `expected` (lists of arrays, one label each)
    elementwise: `|actual - expected| <= atol * max(1, max|expected|) + rtol * |expected|`.
    Adds `worst` (the worst element) and, when not ok, `at` / `got` / `want` for the reason."""
    rtol, atol = tolerance
    shapes = [tuple(np.shape(a)) for a in actual]
    found = {"shape": shapes[0] if len(shapes) == 1 else tuple(shapes), "max_abs_error": 0.0,
             "max_rel_error": 0.0, "ok": True, "count": 0, "size": 0}
    worst_excess = -math.inf
    for block, reference, label in zip(actual, expected, labels):
        a, b = np.asarray(block, np.float64), np.asarray(reference, np.float64)
        if a.shape != b.shape:
            return {**found, "ok": False, "problem": f"has shape {a.shape}, but the finite "
                                                    f"differences have shape {b.shape}"}
        diff = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only: never within
        bound = atol * max(1.0, float(np.max(np.abs(b), initial=0.0))) + rtol * np.abs(b)
        excess = diff - bound
        found["size"] += a.size
        if not a.size:
            continue
        nonzero = b != 0
        found["max_abs_error"] = max(found["max_abs_error"], float(diff.max()))
        found["max_rel_error"] = max(found["max_rel_error"], float(
            (diff[nonzero] / np.abs(b[nonzero])).max(initial=0.0)))
        found["count"] += int((excess > 0).sum())
        index = np.unravel_index(np.argmax(excess), excess.shape)
        if excess[index] > worst_excess:
            worst_excess = float(excess[index])
            where = at_index(index) if a.ndim else "[]"
            found.update(worst=where if len(actual) == 1 else f"{label}: {where}",
                         got=float(a[index]), want=float(b[index]))
    found["ok"] = found["count"] == 0
    return found


def number(x) -> str:
    """A value for a reason: 6 significant digits, and a float look ("0.0", "-2.0")."""
    text = f"{x:.6g}"
    return text + ".0" if text.lstrip("-").isdigit() else text


@dataclasses.dataclass
class DerivativeReport:
    """What `check_derivatives` found.

    `rows`: one `DerivativeRow` per (function, mode, strategy), failing rows first.
    `notes`: what was not run, or run differently, and why (a mode left out, differences
    taken in float32, a vectorization fallback). `ok` needs at least one row and every row
    ok. `str(report)` is a table; `assert_ok()` raises AssertionError with it.
    """

    rows: list
    notes: list = dataclasses.field(default_factory=list)
    function: str = ""
    order: int = 1

    def __post_init__(self):
        self.rows = sorted(self.rows, key=lambda row: row.ok)

    @property
    def failing(self) -> list:
        return [row for row in self.rows if not row.ok]

    @property
    def ok(self) -> bool:
        return bool(self.rows) and not self.failing

    def assert_ok(self) -> None:
        __tracebackhide__ = True  # pytest shows the table, not this frame
        if not self.ok:
            raise AssertionError(str(self))

    def to_dict(self) -> dict:
        """JSON-serialisable: shapes as lists, NaN and infinite numbers as None."""
        return {"ok": self.ok, "function": self.function, "order": self.order,
                "notes": list(self.notes), "rows": [_json_row(row) for row in self.rows]}

    def __str__(self) -> str:
        failing = len(self.failing)
        head = (f"check_derivatives({self.function}, order={self.order}): "
                + (f"{failing} of {len(self.rows)} rows fail" if failing
                   else f"all {len(self.rows)} rows agree with the finite differences"
                   if self.rows else "no rows"))
        return "\n".join([head, *_table(self.rows), *(f"Note: {n}" for n in self.notes)])


_COLUMNS = ("", "function", "mode", "strategy", "shape", "max abs err", "max rel err",
            "vs routes", "worst at", "reason")


def _table(rows) -> list:
    return table(_COLUMNS, [_cells(row) for row in rows])


def _cells(row) -> tuple:
    def figure(x):
        return "-" if x is None else f"{x:.2g}"

    return ("ok" if row.ok else "FAIL", row.function, row.mode, row.strategy,
            "-" if row.shape is None else str(tuple(row.shape)), figure(row.max_abs_error),
            figure(row.max_rel_error), figure(row.route_difference), row.worst or "-",
            row.reason)


def _json_row(row) -> dict:
    out = dataclasses.asdict(row)
    out["shape"] = None if row.shape is None else _listed(row.shape)
    for key in ("max_abs_error", "max_rel_error", "route_difference"):
        if out[key] is not None and not math.isfinite(out[key]):
            out[key] = None
    return out


def _listed(shape):
    return [_listed(s) if isinstance(s, tuple) else int(s) for s in shape]
