"""What CG111 proves about the code it rewrites (`compat_grads.migrate.rules.cg111_laplacian_loop`):
the source's rank, whether the target is one scalar per sample or has no batch axis, and
whether the rewrite may move and delete the code's lines. A term is the rule's `Term`
(`u`, `x`, the gradient call)."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rebinding, shapes
from compat_grads.migrate.context import Context


def matrix(ctx: Context, term) -> shapes.Matrix | None:
    """What the module proves about `x`'s rank, its names read where the term reads them."""
    return shapes.matrix(ctx.tree, term.x, ctx.names, rebinding.definer(ctx, term.node))


REDUCTIONS = frozenset(f"tf.reduce_{r}" for r in (
    "sum", "mean", "max", "min", "prod", "logsumexp", "all", "any"))


def unbatched(ctx: Context, u: ast.expr) -> bool:
    """Whether `u` (or the one value its name or attribute is assigned) is a list or tuple
    of targets, or a reduction without axis or over axis 0: no batch axis first."""
    value = (rebinding.value_at(ctx, u, u.id) if isinstance(u, ast.Name) else shapes.definition(
        ctx.tree, u) if isinstance(u, ast.Attribute) else None)
    for node in (u, value):
        if isinstance(node, ast.List | ast.Tuple):
            return True
        if isinstance(node, ast.Call) and ctx.names.qualname(node) in REDUCTIONS:
            args = pt.call_args(node, ("input_tensor", "axis"))
            axis = args[1] if args else ast.Constant(1)
            if axis is None or ast.unparse(axis) in ("0", "[0]", "(0,)"):
                return True
    return False


def shares_line(ctx: Context, stmt: ast.stmt) -> bool:
    """Whether another statement of `stmt`'s block is on one of its lines (`n = 3; lap = 0`):
    the fix deletes whole lines."""
    return any(s is not stmt and s.lineno <= stmt.end_lineno and s.end_lineno >= stmt.lineno
               for s in ctx.block_of(stmt))


def stable(ctx: Context, term) -> bool:
    """Whether `u` (read where the first gradient was taken) means the same where the
    rewrite puts it: each name in it is the same variable there, and each name and
    attribute is assigned at most once in the module."""
    parts = [n for n in ast.walk(term.u) if isinstance(n, ast.Name | ast.Attribute)
             and isinstance(n.ctx, ast.Load)]
    binder = rebinding.binder
    same = all(binder(ctx, n, n.id) is binder(ctx, term.node, n.id) for n in parts
               if isinstance(n, ast.Name))
    return same and all(shapes.stores(ctx.tree, n) <= 1 for n in parts)


def per_sample_scalar(ctx: Context, term) -> bool:
    """Whether `u` is provably of shape `[b]` or `[b, 1]`, the targets `batch_laplacian`
    takes (the loop sums any other shape, which `batch_divergence` of its gradient does)."""
    found = shapes.dims(ctx.tree, term.u, ctx.names, rebinding.definer(ctx, term.u),
                        shapes.DEPTH)
    return found is not None and (len(found) == 1 or len(found) == 2 and isinstance(
        found[1], ast.Constant) and found[1].value == 1)
