"""The scanner's data model: a `Rule` (one legacy idiom), the `Finding`s it reports and the
`Edit`s that rewrite them. Plain data, no analysis: the rules (`migrate/rules/`) make them,
`command.py` prints them, `fixer.py` applies their edits."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

REPORT_ONLY = "report only"


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace the code from `start` to `end` ((line, column), 1-based lines, 0-based
    character columns, end exclusive) by `text`; `text` None deletes the statement there."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str | None


@dataclasses.dataclass(frozen=True)
class Finding:
    """One legacy idiom at `line`:`col` (both 1-based; col counts characters)."""

    line: int
    col: int
    code: str
    message: str
    edits: tuple[Edit, ...] = ()
    imports: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Rule:
    """One family of findings, written in one module of `migrate/rules/`.

    Attributes:
      code: the stable identifier printed with every finding, e.g. "CG101".
      name: a short kebab-case name.
      summary: one line for the code table.
      fix: what `--fix` does with it, as the docs heading says it ("rewrite", "report only",
        "rewrite for the canonical loop", ...).
      messages: the finding messages, as `str.format` templates by key.
      docs: the reStructuredText docs/scan.rst shows under the rule's heading.
      visits: which nodes `check` is called on: "rows" (every call, before the others, so
        the row loops own the gradient calls they hold), "nodes" (every node), or
        "gradients" (the `tf.gradients` calls no other rule took).
      check: `check(context, node)`, the findings at `node`.
      why_not: why a finding is not rewritten, by key (the "(not rewritten: ...)" parts).
    """

    code: str
    name: str
    summary: str
    fix: str
    messages: Mapping[str, str]
    docs: str
    visits: str
    check: Callable[[Any, ast.AST], list[Finding]]
    why_not: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def fixable(self) -> bool:
        """Whether `--fix` rewrites instances whose meaning it can prove is kept."""
        return self.fix != REPORT_ONLY

    @property
    def heading(self) -> str:
        """The docs heading: `CG101 — jacobian-loop (rewrite for the canonical loop)`."""
        return f"{self.code} \N{EM DASH} {self.name} ({self.fix})"

    def message(self, key: str, **fields: str) -> str:
        """The message `key`, its fields filled in."""
        return self.messages[key].format(**fields)
