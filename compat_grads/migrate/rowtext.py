"""The rewrite text of a stack of gradient rows, shared by the rules that find them (a loop,
a `tf.stack` of a comprehension, a `tf.map_fn`): one Jacobian when the source proves it
equal, else a call to the runtime-checked helpers of `compat_grads.migrate`."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rebinding, shapes
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
    if var in names_in(grad.xs):
        return None
    hessian = _hessian_text(ctx, grad, var, count, iterable) if expand is None and (
        function == "stacked_jacobian") else None
    if hessian is not None:
        return hessian
    rows = (pt.index_rows(grad.ys, var, count, ctx.names) if count is not None
            else pt.unstack_rows(grad.ys, var, iterable, ctx.names))
    source = ctx.writer.source_of(grad) if rows else None
    if source is None:
        return None
    if expand is not None:
        text = ctx.writer.call(function, ctx.writer.rows(rows), source)
        return f"{ctx.writer.tf}.expand_dims({text}, axis=1)"
    vector = rebinding.rank_at(ctx, rows.array, element) == 1
    if vector and _spans(ctx, rows.count, rows.array, element):
        rows = pt.Rows(rows.array, 0, None)
    return ctx.writer.call(function, ctx.writer.rows(rows, vector), source)


def _hessian_text(ctx: Context, grad: pt.Grad, var: str, count: ast.expr | None,
                  iterable: ast.expr) -> str | None:
    """`cg.hessian(loss, w)` (its first n rows, `[:n]`, for a loop over fewer) for rows of
    `g = tf.gradients(loss, w)[0]` differentiated with respect to that `w`, a vector by the
    shapes (a row of a matrix gradient is summed: no Hessian row), so `g` is one tensor of
    `w`'s shape. A named `g` needs its `loss` and `w` to be the same tensors where the
    rewrite reads them."""
    at = grad.call
    rows = (pt.index_rows(grad.ys, var, count, ctx.names, proven=True) if count is not None
            else pt.unstack_rows(grad.ys, var, iterable, ctx.names))
    array = rows.array if rows is not None and not rows.axis else None
    value = rebinding.value_at(ctx, at, array.id) if isinstance(array, ast.Name) else array
    inner = pt.indexed_grad(value, ctx.names) if value is not None else None
    if inner is None or inner.index != 0 or not inner.clean or (
            ast.dump(inner.xs) != ast.dump(grad.xs)) or rebinding.rank_at(ctx, grad.xs, at) != 1:
        return None
    if value is not array and not rebinding.same_objects(
            ctx, (inner.ys, inner.xs), ctx.statement_of(value), ctx.statement_of(at)):
        return None
    w = ctx.writer
    loss = inner.ys
    scalar = rebinding.value_at(ctx, at, loss.id) if isinstance(loss, ast.Name) else loss
    text = w.call("hessian", w.total(loss, scalar), w.text(grad.xs))
    count = rows.count
    if count is None or pt.covers(count, pt.Rows(array, 0, None), ctx.names) or _spans(
            ctx, count, grad.xs, at):
        return text
    return f"{text}[:{w.text(count)}]"


def _spans(ctx: Context, count: ast.expr | None, array: ast.expr, at: ast.AST) -> bool:
    """Whether a loop over `range(count)` takes every row of `array`: `array.shape[0]` and
    its spellings, or the very dimension its definition writes."""
    if count is None or pt.covers(count, pt.Rows(array, 0, None), ctx.names):
        return True
    size = shapes.dims(ctx.tree, array, ctx.names, rebinding.definer(ctx, at), shapes.DEPTH)
    return bool(size) and size[0] is not None and ast.dump(size[0]) == ast.dump(count)


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
