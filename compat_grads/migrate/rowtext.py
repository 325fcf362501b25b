"""The rewrite text of a stack of gradient rows, shared by the rules that find them (a loop,
a `tf.stack` of a comprehension, a `tf.map_fn`): one Jacobian when the source proves it
equal, else a call to the runtime-checked helpers of `compat_grads.migrate`."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.context import Context, column, expand_dims_zero, names_in, reshape_flat
from compat_grads.migrate.findings import Edit

ROW_ADVICE = "cg.stacked_jacobian(y, x)"
COLUMN_ADVICE = ("cg.stacked_jacobian(tf.reduce_sum(y, axis=0), x) (tf.gradients sums each "
                 "column y[:, i] over its rows)")


def row_advice(grads: list[ast.Call]) -> tuple[str, str]:
    """("row" or "column", what replaces a loop over `tf.gradients(y[i], x)`): over
    columns `y[:, i]` each gradient sums its column over the rows, so the stack is the
    Jacobian of the row sum."""
    parts = [pt.grad_parts(g) for g in grads]
    if parts and all(p is not None and column(p[0]) for p in parts):
        return "column", COLUMN_ADVICE
    return "row", ROW_ADVICE


def suggest(edits: tuple[Edit, ...], fallback: str) -> str:
    """The last rewrite text of `edits`, else `fallback`."""
    texts = [e.text for e in edits if e.text]
    return texts[-1] if texts else fallback


def rows_text(ctx: Context, element: ast.expr, var: str, iterable: ast.expr) -> str | None:
    """The rewrite of stacking `element` over `var in iterable`: a Jacobian when the
    source proves it equal, else the runtime-checked `cg.migrate.gradient_rows`."""
    return (jacobian_text(ctx, element, var, iterable, "range")
            or helper_text(ctx, element, var, iterable))


def helper_text(ctx: Context, element: ast.expr, var: str, iterable: ast.expr,
                function: str = "gradient_rows", cache: ast.expr | None = None,
                cached: ast.expr | None = None) -> str | None:
    """`cg.migrate.<function>([cache, ]y, xs, iterable, axis=..., index=...[, cached=])`
    for rows `y[i]` or columns `y[:, i]` of `tf.gradients(...)[k]` (stacked rows may be
    `tf.expand_dims(row, 0)`, or `tf.reshape(row, [-1])`: `flat=True`). It evaluates `y`,
    `xs`, the cache and the iterable once, as the loop does for the iterable: they must
    be pure, and the loop variable must appear in the row index only."""
    expand, flat = expand_dims_zero(element, ctx.names), reshape_flat(element, ctx.names)
    if (expand is not None or flat is not None) and function != "gradient_rows":
        return None
    grad = _row_grad(ctx, next((n for n in (expand, flat) if n is not None), element))
    axis = _row_axis(grad.ys, var) if grad is not None and grad.clean else None
    if axis is None or ctx.writer is None:
        return None
    ys, caches = grad.ys.value, [c for c in (cache, cached) if c is not None]
    if not all(pt.is_pure(n, ctx.names) for n in (ys, grad.xs, *caches)):
        return None
    if var in set().union(*map(names_in, (ys, grad.xs, iterable, *caches))):
        return None
    w = ctx.writer
    args = [w.text(cache)] if cache is not None else []
    args += [w.text(ys), w.text(grad.xs), w.text(iterable)]
    args += [f"axis={axis}"] if axis else []
    args += [f"index={grad.index}"] if grad.index != 0 else []
    args += ["flat=True"] if flat is not None else []
    args += [f"cached={w.text(cached)}"] if cached is not None else []
    text = w.call(f"migrate.{function}", *args)
    return f"{w.tf}.expand_dims({text}, axis=1)" if expand is not None else text


def jacobian_text(ctx: Context, element: ast.expr, var: str, iterable: ast.expr, kind: str,
                  function: str = "stacked_jacobian") -> str | None:
    """The rewrite of stacking `element` over `var in iterable` (`kind` "range" or
    "tf.range") as one Jacobian, or None."""
    expand = expand_dims_zero(element, ctx.names)
    grad = pt.indexed_grad(expand if expand is not None else element, ctx.names)
    if grad is None or not grad.clean:
        return None
    count = pt.range_count(iterable, ctx.names, tf_range=kind == "tf.range")
    rows = (pt.index_rows(grad.ys, var, count, ctx.names) if count is not None
            else pt.unstack_rows(grad.ys, var, iterable, ctx.names))
    source = ctx.writer.source_of(grad) if rows else None
    if source is None or var in names_in(grad.xs):
        return None
    text = ctx.writer.call(function, ctx.writer.rows(rows), source)
    return f"{ctx.writer.tf}.expand_dims({text}, axis=1)" if expand is not None else text


def _row_grad(ctx: Context, node: ast.expr) -> pt.Grad | None:
    """`tf.gradients(...)[k]`, or the call unpacked by `(g,) = ...` (index None)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and (
            node.slice.value is None):
        parts = pt.grad_parts(node.value) if ctx.is_gradients(node.value) else None
        return pt.Grad(node.value, parts[0], parts[1], None, parts[2]) if parts else None
    return pt.indexed_grad(node, ctx.names)


def _row_axis(target: ast.expr, var: str) -> int | None:
    """0 for `y[var]`, 1 for `y[:, var]`, else None."""
    if not isinstance(target, ast.Subscript):
        return None
    index = target.slice
    if isinstance(index, ast.Name) and index.id == var:
        return 0
    return 1 if column(target) and isinstance(index.elts[1], ast.Name) and (
        index.elts[1].id == var) else None
