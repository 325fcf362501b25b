"""The matrix: every case × every public function × every strategy (× unconnected mode)."""

from __future__ import annotations

import dataclasses
import fnmatch

import compat_grads as cg
from compat_grads._structure import STRATEGIES
from compat_grads.testing.cases import CASES, Case

FUNCTIONS = ("stacked_jacobian", "per_element_gradients", "batch_jacobian")
_WITH_STRATEGY = ("stacked_jacobian", "batch_jacobian")


@dataclasses.dataclass(frozen=True)
class Item:
    """One call to check: `function(case, strategy=..., unconnected_gradients=...)`."""

    case: Case
    function: str
    strategy: str | None = None
    unconnected: str = "none"

    @property
    def id(self) -> str:
        parts = [self.case.name, self.function, self.strategy, self.unconnected]
        return "-".join(p for p in parts if p and p != "none")

    def __str__(self):
        return self.id

    def call(self, target, sources, tape=None):
        kwargs = {"tape": tape, "unconnected_gradients": self.unconnected}
        if self.strategy is not None:
            kwargs["strategy"] = self.strategy
        return getattr(cg, self.function)(target, sources, **kwargs)


def _applies(case: Case, function: str) -> bool:
    return function != "batch_jacobian" or case.batched


def items(pattern: str | None = None) -> list:
    """All matrix items, or those whose id matches the glob / substring `pattern`."""
    out = []
    for case in CASES:
        for function in (f for f in FUNCTIONS if _applies(case, f)):
            strategies = STRATEGIES if function in _WITH_STRATEGY else (None,)
            modes = ("none", "zero") if case.unconnected else ("none",)
            out += [Item(case, function, s, u) for s in strategies for u in modes]
    if pattern:
        glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
        out = [item for item in out if fnmatch.fnmatch(item.id, glob)]
    return out
