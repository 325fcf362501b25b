"""CG110: `tape.gradient(y[i], x)` in a for loop or comprehension, one backward pass per
row (None for every row when the rows are sliced after the tape stopped recording)."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import scopes
from compat_grads.migrate.context import SCOPES, Context, dependent_names, refers
from compat_grads.migrate.findings import REPORT_ONLY, Finding, Rule
from compat_grads.migrate.rules.cg104_tape_slice_source import sliced_sources

DOCS = """\
.. code-block:: python

   for k in range(classes):
       grads.append(tape.gradient(predictions[:, k], x))

One backward pass per row (or column): use ``cg.stacked_jacobian(y, x, tape=tape)``
(which keeps separate passes where they are faster, as for a few class rows through a
convolutional net) or ``tape.jacobian(y, x)``. Not rewritten: the rows are collected by your own
code (often into NumPy).

When the loop runs after the ``with`` block that made the tape (and outside any
``with tape:`` that records again), each row is sliced after the tape stopped recording:
the tape never saw the slice and every gradient is None. The finding says so, and
advises ``tape.jacobian(y, x)`` or slicing inside the ``with`` block.
"""


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG110 at a `tape.gradient` call in a row loop (unless its source is a slice: that
    is CG104's)."""
    if not (isinstance(node, ast.Call) and ctx.is_tape_call(node, ("gradient",))):
        return []
    if id(node) in ctx.handled or sliced_sources(ctx, node):
        return []
    loop = ctx.enclosing_loop(node) or _row_loop_of(ctx, node)
    if loop is None:
        return []
    what = "for loop" if isinstance(loop, ast.For) else "comprehension"
    tape = node.func.value.id
    key = "after recording" if _after_recording(ctx, loop, tape) else "loop"
    return [ctx.finding(node, RULE.code, RULE.message(key, tape=tape, what=what))]


def _after_recording(ctx: Context, loop: ast.AST, tape: str) -> bool:
    """Whether `loop` runs after the `with` block that made `tape` (in the same scope),
    outside any `with tape:` that records again."""
    if isinstance(loop, ast.comprehension):
        loop = ctx.parents.get(id(loop))
    scope = ctx.scope(loop)
    blocks = [n for n in ast.walk(scope) if isinstance(n, ast.With | ast.AsyncWith)
              and any(_names_tape(item, tape) for item in n.items)] if scope else []
    made = [b for b in blocks if any(isinstance(i.optional_vars, ast.Name)
                                     and i.optional_vars.id == tape for i in b.items)]
    if len(made) != 1 or made[0].end_lineno >= loop.lineno:
        return False
    return not any(id(loop) in {id(n) for n in ast.walk(b)} for b in blocks)


def _row_loop_of(ctx: Context, call: ast.Call) -> ast.For | None:
    """The for loop around `call` whose index selects the target through names the loop
    assigns (`prediction = predictions[:, i]`) while the sources stay the same."""
    args = pt.call_args(call, ("target", "sources"))
    if not args or None in args:
        return None
    node = call
    while not isinstance(node, SCOPES):
        node = ctx.parents.get(id(node))
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)):
            continue
        index = scopes.references(node, {node.target.id})
        rows = {id(n) for n in ast.walk(node) if ctx.selects(n, index)}
        names = dependent_names(node, set(), rows)
        if refers(args[0], names) and not refers(args[1], names | index):
            return node
    return None


def _names_tape(item: ast.withitem, tape: str) -> bool:
    """`with ... as tape` or `with tape:`."""
    bound = isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == tape
    return bound or (isinstance(item.context_expr, ast.Name) and item.context_expr.id == tape)


RULE = Rule(
    code="CG110", name="tape-gradient-loop", fix=REPORT_ONLY,
    summary=("tape.gradient(y[i], x) in a for loop or comprehension: one backward pass per "
             "row (None for rows sliced after the tape stopped recording)"),
    messages={
        "after recording": (
            "{tape}.gradient of one row per iteration of a {what}, each row sliced after "
            "{tape} stopped recording (outside its `with` block): {tape} never saw the slice, "
            "so the result is None; use {tape}.jacobian(y, x), or slice inside the `with` "
            "block (not rewritten: the code does not compute what it means to)"),
        "loop": ("hand-built Jacobian: {tape}.gradient of one row per iteration of a {what} "
                 "(one backward pass each); use {tape}.jacobian(y, x) or "
                 "cg.stacked_jacobian(y, x, tape={tape}) (not rewritten: the rows are "
                 "collected by your own code)"),
    },
    docs=DOCS, visits="nodes", check=check)
