"""How a derivative is computed, as the engine below the call path reads it: the stacking
strategy, what unconnected sources give, the chunk size and the memory limit. The call path
makes one from a public call's options (`compat_grads._src.call.options`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class How:
    """How to compute: strategy, what unconnected sources give, the chunk size ("auto",
    decided by `compat_grads._src.memory.fit` from `memory_budget`), and the memory limit
    (`max_bytes`, checked by `compat_grads._src.memory.check`). `planned`: the strategy was
    chosen for "auto", so the rows follow the static rule of `compat_grads._src.stacking.cost` (an
    explicit strategy keeps its meaning)."""

    strategy: str = "auto"
    unconnected: str = "none"
    chunk_size: int | str | None = "auto"
    max_bytes: int | None = None
    planned: bool = False
    memory_budget: int | float | None = None

    @property
    def vectorize(self) -> bool:
        return self.strategy != "loop"

    def using(self, strategy) -> How:
        return dataclasses.replace(self, strategy=strategy,
                                   planned=self.planned or self.strategy == "auto")
