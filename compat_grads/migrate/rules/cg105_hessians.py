"""CG105: `tf.hessians` / `tf.compat.v1.hessians`, graph only and one row at a time."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.context import Context, reduce_sum_of
from compat_grads.migrate.findings import Finding, Rule
from compat_grads.migrate.rowtext import suggest

DOCS = """\
``tf.hessians(ys, xs)`` sums ``ys`` and returns a list with one ``x.shape + x.shape`` block
per source, without cross terms.

.. code-block:: python

   H = tf.hessians(y, x)
   # --fix:
   H = [cg.hessian(tf.reduce_sum(y), x)]

   H = tf.compat.v1.hessians(loss, [w, b])
   # --fix:
   H = [cg.hessian(tf.reduce_sum(loss), w), cg.hessian(tf.reduce_sum(loss), b)]

Report only when ``ys`` is a list.
"""

ADVICE = "[cg.hessian(tf.reduce_sum(y), x)]"


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG105 at a `tf.hessians` call."""
    if not (isinstance(node, ast.Call) and ctx.names.qualname(node) == "tf.hessians"):
        return []
    parts = pt.grad_parts(node)
    edits = ()
    if parts and parts[2] and ctx.writer is not None:
        text = _hessians_text(ctx, *parts[:2])
        edits = (ctx.replace(node, text),) if text else ()
    return [ctx.finding(node, RULE.code, RULE.message("hessians", use=suggest(edits, ADVICE)),
                        edits)]


def _hessians_text(ctx: Context, ys: ast.expr, xs: ast.expr) -> str | None:
    """tf.hessians sums ys and returns one x.shape + x.shape block per x, no cross terms."""
    w, names = ctx.writer, ctx.names
    if isinstance(ys, ast.List | ast.Tuple | ast.ListComp) or (
            isinstance(ys, ast.Name) and ys.id not in names.tensors
            and _bound_to_list(ctx, ys.id)):
        return None
    total = w.text(ys) if reduce_sum_of(ys, names) else f"{w.tf}.reduce_sum({w.text(ys)})"
    if isinstance(xs, ast.List | ast.Tuple):
        if any(isinstance(e, ast.Starred) for e in xs.elts) or (
                len(xs.elts) > 1 and not pt.is_pure(ys, names)):
            return None
        return "[" + ", ".join(w.call("hessian", total, w.text(e)) for e in xs.elts) + "]"
    if names.is_tensor(xs):
        return f"[{w.call('hessian', total, w.text(xs))}]"
    if not pt.is_pure(ys, names) or "x_" in names.bound:
        return None
    return f"[{w.call('hessian', total, 'x_')} for x_ in {w.tf}.nest.flatten({w.text(xs)})]"


def _bound_to_list(ctx: Context, name: str) -> bool:
    return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.List | ast.ListComp)
               and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
               for n in ctx.nodes)


RULE = Rule(
    code="CG105", name="hessians", fix="rewrite",
    summary="tf.hessians / tf.compat.v1.hessians: graph only, one row at a time",
    messages={"hessians": "tf.hessians is graph-only and builds one gradient per row; use "
                          "{use}"},
    docs=DOCS, visits="nodes", check=check)
