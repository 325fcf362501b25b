"""What `compare_port` found: one `PortRow` per compared quantity, in a `PortReport`."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compat_grads.testing.tolerances import port_tolerance as tolerance

__all__ = ["PortReport", "PortRow", "compare_values", "tolerance"]


@dataclasses.dataclass
class PortRow:
    """One comparison: `quantity` ("value" or a derivative name) of `output` with respect to
    `wrt` ("" for values), legacy side against the port run in `mode`.

    `max_abs_error` is `max|ported - legacy|`; `max_rel_error` is `max(|ported - legacy| /
    |legacy|)` over the elements where legacy is not zero; `reason` says why a row is not
    ok.
    """

    output: str
    quantity: str
    wrt: str
    legacy_shape: tuple | None = None
    ported_shape: tuple | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    ok: bool = False
    reason: str = ""
    mode: str = "eager"
    legacy_dtype: str | None = None
    ported_dtype: str | None = None
    rtol: float | None = None
    atol: float | None = None

    @classmethod
    def missing(cls, mode, output, side) -> PortRow:
        return cls(output, "value", "", mode=mode,
                   reason=f"only the {side} side returns this output")

    @classmethod
    def failed_call(cls, legacy, ported, **fields) -> PortRow:
        """A row where one side (or both) raised: (kind, error text or value) per side."""
        said = {side: text for side, (kind, text) in (("legacy", legacy), ("ported", ported))
                if kind == "error"}
        if len(said) == 2:
            reason = ("both sides raised " + said["legacy"] if said["legacy"] == said["ported"]
                      else f"both sides raised: legacy {said['legacy']}; ported "
                           f"{said['ported']}")
        else:
            reason = "; ".join(f"{side} raised {text}" for side, text in said.items())
        return cls(**fields, **_shapes(legacy[1] if "legacy" not in said else None,
                                       ported[1] if "ported" not in said else None),
                   reason=reason)

    @classmethod
    def unconnected(cls, legacy, ported, **fields) -> PortRow:
        """A derivative that is None (not connected) on one side or both."""
        if legacy is None and ported is None:
            return cls(**fields, ok=True, reason="not connected on either side")
        side = "legacy" if legacy is None else "ported"
        return cls(**fields, **_shapes(legacy, ported),
                   reason=f"{side} is None: not connected")


def _shapes(legacy, ported) -> dict:
    def shape(x):
        return None if x is None else tuple(np.shape(x))

    def dtype(x):
        return None if x is None else np.asarray(x).dtype.name

    return dict(legacy_shape=shape(legacy), ported_shape=shape(ported),
                legacy_dtype=dtype(legacy), ported_dtype=dtype(ported))


def compare_values(legacy, ported, rtol, atol) -> dict:
    """PortRow fields for two arrays: shapes, errors, ok and the reason when not ok.

    Elementwise `|ported - legacy| <= atol * max(1, max|legacy|) + rtol * |legacy|`; NaN
    matches NaN and an infinity the same infinity."""
    a, b = np.asarray(legacy), np.asarray(ported)
    fields = {**_shapes(a, b), "ok": False}
    if a.shape != b.shape:
        return {**fields, "reason": f"shape differs: legacy {a.shape} vs ported {b.shape}"}
    if not (_numeric(a) and _numeric(b)):
        same = bool(np.array_equal(a, b))
        return {**fields, "ok": same, "reason": "" if same else "values differ"}
    x, y = a.astype(np.float64), b.astype(np.float64)
    equal = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore"):  # inf - inf and NaN: `equal` or `one_sided` decide
        diff = np.where(equal, 0.0, np.abs(x - y))
    fields.update(max_abs_error=_largest(diff), max_rel_error=_largest(
        diff[(x != 0) & np.isfinite(x)] / np.abs(x[(x != 0) & np.isfinite(x)])))
    one_sided = np.isnan(x) != np.isnan(y)
    if one_sided.any():
        index = _first(one_sided)
        side = "ported" if np.isnan(y[index]) else "legacy"
        return {**fields, "reason": f"NaN on the {side} side only at {at_index(index)}: "
                                    f"{a[index]} vs {b[index]} (legacy vs ported)"}
    finite = np.abs(np.where(np.isfinite(x), x, 0.0))
    bound = atol * max(1.0, float(finite.max(initial=0.0))) + rtol * finite
    excess = np.where(equal, -np.inf, diff - bound)
    if not (excess > 0).any():
        return {**fields, "ok": True}
    index = np.unravel_index(np.argmax(excess), excess.shape)
    count = int((excess > 0).sum())
    return {**fields, "reason": f"values differ at {at_index(index)}: {a[index]} vs {b[index]} "
                                f"(legacy vs ported; {count} of {a.size} elements)"}


def _numeric(x) -> bool:
    return x.dtype.kind in "biufc" or x.dtype.name == "bfloat16"


def _largest(values) -> float:
    return float(values.max()) if values.size else 0.0


def _first(mask):
    return tuple(int(i) for i in np.argwhere(mask)[0])


def at_index(index) -> str:
    return str([int(i) for i in index])


@dataclasses.dataclass
class PortReport:
    """What `compare_port` found.

    `rows`: one `PortRow` per (mode, output, quantity, wrt). `unmapped`: {"legacy": legacy
    trainable variables not in `weights`, "ported": trainable variables the port reads that
    no `weights` entry maps to}. `ok` needs every row ok and nothing unmapped (a port that
    forgot a weight has not been compared with the same weights). `str(report)` is a table
    with the failing rows first; `assert_ok()` raises AssertionError with that table.
    """

    rows: list
    unmapped: dict = dataclasses.field(default_factory=lambda: {"legacy": [], "ported": []})
    legacy: str = ""

    @property
    def failing(self) -> list:
        return [row for row in self.rows if not row.ok]

    @property
    def ok(self) -> bool:
        return not self.failing and not any(self.unmapped.values())

    def assert_ok(self) -> None:
        __tracebackhide__ = True  # pytest shows the table, not this frame
        if not self.ok:
            raise AssertionError(str(self))

    def to_dict(self) -> dict:
        """JSON-serialisable: shapes as lists, NaN and infinite errors as None."""
        return {"ok": self.ok, "legacy": self.legacy, "unmapped": dict(self.unmapped),
                "rows": [_json_row(row) for row in self.rows]}

    def __str__(self) -> str:
        failing = len(self.failing)
        head = (f"compare_port({self.legacy}): "
                + (f"{failing} of {len(self.rows)} rows differ" if failing
                   else f"all {len(self.rows)} rows agree"))
        lines = [head, *_table(sorted(self.rows, key=lambda row: row.ok))]
        for side, what in (("legacy", "legacy trainable variables not mapped in weights"),
                           ("ported", "variables the port reads that weights does not map")):
            if self.unmapped.get(side):
                lines.append(f"Unmapped: {what}: {', '.join(self.unmapped[side])}")
        return "\n".join(lines)


_COLUMNS = ("", "mode", "output", "quantity", "wrt", "legacy shape", "ported shape",
            "max abs err", "max rel err", "reason")


def _table(rows) -> list:
    return table(_COLUMNS, [_cells(row) for row in rows])


def table(columns, lines) -> list:
    """The report's text table: `columns` and the cells of each line, aligned, the last
    column (the reason) left ragged. `DerivativeReport` shares it."""
    cells = [columns, *lines]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(line, widths)), line[-1]]).rstrip()
            for line in cells]


def _cells(row) -> tuple:
    def number(x):
        return "-" if x is None else f"{x:.2g}"

    def shape(s):
        return "-" if s is None else str(tuple(s))

    return ("ok" if row.ok else "FAIL", row.mode, row.output, row.quantity, row.wrt or "-",
            shape(row.legacy_shape), shape(row.ported_shape), number(row.max_abs_error),
            number(row.max_rel_error), row.reason)


def _json_row(row) -> dict:
    out = dataclasses.asdict(row)
    for key in ("legacy_shape", "ported_shape"):
        out[key] = None if out[key] is None else [int(n) for n in out[key]]
    for key in ("max_abs_error", "max_rel_error"):
        if out[key] is not None and not math.isfinite(out[key]):
            out[key] = None
    return out
