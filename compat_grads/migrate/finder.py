"""Finds the legacy gradient idioms in one parsed module, with `ast` only (no LibCST here:
scanning must stay fast), by running the rules of `migrate/rules/` over the shared walk."""

from __future__ import annotations

import ast

from compat_grads.migrate.context import Context
from compat_grads.migrate.findings import Finding
from compat_grads.migrate.names import Names
from compat_grads.migrate.rules import RULES


def find(tree: ast.Module, source: str, names: Names) -> list[Finding]:
    """All findings in `tree` (parsed from `source`), sorted by position.

    The rules run in three passes: the row loops over every call first (the gradient calls
    they hold are theirs), then every rule over every node, then the rules of the
    `tf.gradients` calls no rule took yet.
    """
    ctx = Context(tree, source, names)
    calls = [n for n in ctx.nodes if isinstance(n, ast.Call)]
    found = _run(ctx, "rows", calls)
    found += _run(ctx, "nodes", ctx.nodes)
    grads = [n for n in calls if ctx.is_gradients(n) and id(n) not in ctx.handled]
    found += _run(ctx, "gradients", grads)
    return sorted(found, key=lambda f: (f.line, f.col, f.code))


def _run(ctx: Context, visits: str, nodes: list[ast.AST]) -> list[Finding]:
    rules = [rule for rule in RULES if rule.visits == visits]
    return [f for node in nodes for rule in rules for f in rule.check(ctx, node)]
