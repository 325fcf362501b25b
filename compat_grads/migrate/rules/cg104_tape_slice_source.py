"""CG104: `tape.gradient(f, x[:, k])`: a slice made after recording has no gradient."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.context import Context
from compat_grads.migrate.findings import REPORT_ONLY, Finding, Rule

DOCS = """\
.. code-block:: python

   df_dx = tape.gradient(f, xy[:, 0])   # None: the slice was made after recording

Differentiate with respect to ``xy`` and slice the result, or use
``cg.per_element_gradients`` / ``cg.batch_jacobian``. Only multi-axis indexing
(``x[:, k]``, ``x[0, ...]``) is flagged: ``variables[0]`` may be a list element.
"""


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG104 at a tape call with respect to a slice."""
    sliced = sliced_sources(ctx, node)
    if not sliced:
        return []
    func = node.func
    return [ctx.finding(node, RULE.code, RULE.message(
        "slice", tape=func.value.id, method=func.attr,
        source=ast.get_source_segment(ctx.source, sliced[0])))]


def sliced_sources(ctx: Context, node: ast.AST) -> list[ast.expr]:
    """The sources of the tape call `node` that are slices of a tensor ([] when `node` is
    no tape call of this module's, or one a row loop reported)."""
    if not isinstance(node, ast.Call) or not ctx.is_tape_call(node) or id(node) in ctx.handled:
        return []
    args = pt.call_args(node, ("target", "sources"))
    sources = args[1] if args else None
    items = sources.elts if isinstance(sources, ast.List | ast.Tuple) else [sources]
    return [s for s in items if _tensor_slice(s)]


def _tensor_slice(node: ast.expr | None) -> bool:
    """`x[:, k]`-like multi-axis indexing, which only a tensor accepts (a list would not)."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
        return False
    return any(isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and e.value in (
        Ellipsis, None)) for e in node.slice.elts)


RULE = Rule(
    code="CG104", name="tape-slice-source", fix=REPORT_ONLY,
    summary="tape.gradient(f, x[:, k]): a slice made after recording has no gradient (None)",
    messages={"slice": "{tape}.{method} with respect to {source}, a slice made after "
                       "recording: the result is None; differentiate with respect to the "
                       "whole tensor and slice the result, or use cg.per_element_gradients / "
                       "cg.batch_jacobian"},
    docs=DOCS, visits="nodes", check=check)
