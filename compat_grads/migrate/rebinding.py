"""Whether a name or an attribute chain read in two places of the source provably means
the same object in both: the tensor a first gradient was taken of, where a rewrite writes
it again further down. Flow-insensitive: a store counts wherever it is, so anything the
source does not settle (an indexed value, a store between the two places or in a loop
around only one of them, `setattr`, `global`) is a doubt, and a doubt is a no."""

from __future__ import annotations

import ast

from compat_grads.migrate import scopes, shapes
from compat_grads.migrate.context import Context


def binder(ctx: Context, at: ast.AST, name: str) -> ast.AST | None:
    """The scope whose `name` the code at `at` reads (None: a global or builtin never bound)."""
    node = ctx.parents.get(id(at))
    while node is not None:
        if isinstance(node, (*scopes.SCOPES, ast.Module)) and scopes.bindings(node)[name]:
            return node
        node = ctx.parents.get(id(node))
    return None


def value_at(ctx: Context, at: ast.AST, name: str) -> ast.expr | None:
    """The value `name` means at `at`: that of the one plain assignment of the scope that
    binds it there."""
    scope = binder(ctx, at, name)
    return scopes.assigned_value(scope, name) if scope is not None else None


def definer(ctx: Context, at: ast.AST) -> shapes.Define:
    """What `shapes` reads a name or attribute by: its one value where `at` reads it."""
    def define(node: ast.expr) -> ast.expr | None:
        if isinstance(node, ast.Name):
            return value_at(ctx, at, node.id)
        return shapes.definition(ctx.tree, node)
    return define


def rank_at(ctx: Context, node: ast.expr, at: ast.AST) -> int | None:
    """The rank of `node`, read at `at`, when the source proves it."""
    return shapes.rank(ctx.tree, node, ctx.names, definer(ctx, at))


def same_objects(ctx: Context, nodes: tuple[ast.expr, ...], first: ast.stmt | None,
                 loop: ast.stmt | None) -> bool:
    """Whether `u` and `x` of the first gradient's assignment are provably the same tensors
    where the rewrite puts them: each a name or an attribute chain of one, the assignment
    in no block the loop is not in, and every store to them (at most one each) before that
    assignment and in no loop body that does not also hold the loop."""
    around = {id(n) for n in _ancestors(ctx, loop)}
    if first is None or loop is None or not all(
            id(n) in around for n in _ancestors(ctx, first, scope=True)):
        return False
    return all(_unmoved(ctx, e, first, loop, around) for e in nodes)


def _unmoved(ctx: Context, node: ast.expr, first: ast.stmt, loop: ast.stmt,
             around: set[int]) -> bool:
    chain, root = [], node
    while isinstance(root, ast.Attribute):
        chain.append(root)
        root = root.value
    if not isinstance(root, ast.Name) or any(
            isinstance(n, ast.Global | ast.Nonlocal) and root.id in n.names
            or _sets_attribute(ctx, n, {a.attr for a in chain}) for n in ast.walk(ctx.tree)):
        return False
    scope = binder(ctx, node, root.id)
    stores = [scopes.binders(scope, root.id) if scope is not None else [],
              *([n for n in ast.walk(ctx.tree) if isinstance(n, ast.Attribute) and isinstance(
                  n.ctx, ast.Store | ast.Del) and ast.unparse(n) == ast.unparse(a)]
                for a in chain)]
    start = (first.lineno, first.col_offset)
    return all(len(found) <= 1 for found in stores) and all(
        all(id(n) in around for n in _ancestors(ctx, store) if isinstance(
            n, ast.For | ast.AsyncFor | ast.While))
        and (ctx.scope(store) is not ctx.scope(first)
             or (store.lineno, store.col_offset) < start)
        for found in stores for store in found)


def _sets_attribute(ctx: Context, node: ast.AST, attrs: set[str]) -> bool:
    """Whether `node` is a `setattr` / `delattr` call that may set one of `attrs`."""
    if not (attrs and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")):
        return False
    name = node.args[1] if len(node.args) > 1 else None
    return not (isinstance(name, ast.Constant) and name.value not in attrs)


def _ancestors(ctx: Context, node: ast.AST, scope: bool = False) -> list[ast.AST]:
    """The nodes around `node`, to the module (to its own scope when `scope`)."""
    found, node = [], ctx.parents.get(id(node))
    while node is not None and not (scope and isinstance(node, (*scopes.SCOPES, ast.Module))):
        found.append(node)
        node = ctx.parents.get(id(node))
    return found
