"""Static shapes the source proves: the rank and the width of a batched source `x`.

A rewrite of a per-dimension loop is the same program only when `x` has rank 2 (a column
`x[:, i]` of a rank-3 `x` is a slab, and the loop's terms are then not diagonal elements)
and, for the count of the loop, when that count is `x`'s width. The source proves them
only from one definition of `x` (a name or an attribute such as `self.x_tf`, assigned once
in the module) by a call whose shape is written out: `tf.placeholder(tf.float32, [None,
d])`, `tf.ones([b, d])` and the like, `tf.reshape(t, [b, d])`, or a `tf.concat` along axis 1
of such tensors (a PINN's `tf.concat([x, t], 1)`)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.names import Names

# Calls whose shape argument (the first, or `shape=`) is the result's shape.
_SHAPED = {"tf.placeholder": 1, "tf.ones": 0, "tf.zeros": 0, "tf.fill": 0,
           "tf.random.normal": 0, "tf.random.uniform": 0, "tf.random.truncated_normal": 0,
           "tf.random_normal": 0, "tf.random_uniform": 0, "tf.truncated_normal": 0,
           "tf.reshape": 1}
Define = Callable[[ast.expr], "ast.expr | None"]
_SHAPE_KEYWORD = {"tf.placeholder": "shape", "tf.reshape": "shape", "tf.fill": "dims"}


@dataclasses.dataclass(frozen=True)
class Matrix:
    """A rank-2 tensor; `width` is its second dimension as the source writes it (an int
    constant, or a name assigned once in the module), None when unknown."""

    width: ast.expr | None


def stores(tree: ast.Module, node: ast.expr) -> int:
    """How many times the module assigns (or deletes) what `node` names (`x`, `self.x`)."""
    text = ast.unparse(node)
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name | ast.Attribute)
               and isinstance(n.ctx, ast.Store | ast.Del) and ast.unparse(n) == text)


def matrix(tree: ast.Module, node: ast.expr, names: Names, define: Define,
           depth: int = 3) -> Matrix | None:
    """What the module proves about `node` being rank 2, or None when it does not;
    `define(name)` is the value a name or attribute means where `node` is read."""
    shape = _shape(tree, node, names, define, depth)
    return Matrix(shape[1]) if shape is not None and shape[0] == 2 else None


def rank(tree: ast.Module, node: ast.expr, names: Names, define: Define) -> int | None:
    """The rank of `node` when the module proves it (as `matrix` does), else None."""
    shape = _shape(tree, node, names, define, 3)
    return shape[0] if shape is not None else None


def _shape(tree: ast.Module, node: ast.expr, names: Names, define: Define,
           depth: int) -> tuple[int, ast.expr | None] | None:
    """(rank, width as `Matrix.width`) of `node` as its one definition writes it."""
    if depth < 0:
        return None
    if isinstance(node, ast.Name | ast.Attribute):
        value = define(node)
        return _shape(tree, value, names, define, depth - 1) if value is not None else None
    if not isinstance(node, ast.Call):
        return None
    name = names.qualname(node)
    if name == "tf.concat":
        return _concat(tree, node, names, define, depth)
    if name not in _SHAPED:
        return None
    shape = _shape_argument(node, name)
    if not isinstance(shape, ast.List | ast.Tuple) or any(
            isinstance(e, ast.Starred) for e in shape.elts):
        return None
    width = _width(tree, shape.elts[1]) if len(shape.elts) == 2 else None
    return len(shape.elts), width


def covers(tree: ast.Module, count: ast.expr, x: ast.expr, known: Matrix,
           names: Names) -> bool:
    """Whether the loop count `count` is provably `x`'s width: `x.shape[1]` and its
    spellings, or the very constant or once-assigned name its definition writes."""
    if pt.covers(count, pt.Rows(x, 1, None), names):
        return True
    return known.width is not None and ast.dump(count) == ast.dump(known.width)


def definition(tree: ast.Module, node: ast.expr) -> ast.expr | None:
    """The value of the module's one assignment to `node` (an attribute such as `self.x`),
    when it is the only one."""
    if stores(tree, node) != 1:
        return None
    text = ast.unparse(node)
    found = [a.value for a in ast.walk(tree) if isinstance(a, ast.Assign)
             and len(a.targets) == 1 and ast.unparse(a.targets[0]) == text]
    return found[0] if found else None


def _shape_argument(call: ast.Call, name: str) -> ast.expr | None:
    at = _SHAPED[name]
    keyword = _SHAPE_KEYWORD.get(name, "shape")
    if len(call.args) > at:
        return call.args[at]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _width(tree: ast.Module, node: ast.expr) -> ast.expr | None:
    """An int constant, or a name the module binds once and never as a parameter (so a
    loop count of that name is the same value wherever it is read)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node
    parameter = any(isinstance(a, ast.arg) and a.arg == getattr(node, "id", None)
                    for a in ast.walk(tree))
    once = isinstance(node, ast.Name) and stores(tree, node) == 1 and not parameter
    return node if once else None


def _concat(tree: ast.Module, call: ast.Call, names: Names, define: Define,
            depth: int) -> tuple[int, ast.expr | None] | None:
    """`tf.concat([a, b, ...], 1)` (or axis -1) of rank-2 parts: rank 2, its width their
    sum when every part's width is an int constant."""
    args = pt.call_args(call, ("values", "axis"))
    values, axis = (args[0], args[1]) if args else (None, None)
    if not (isinstance(values, ast.List | ast.Tuple) and values.elts and isinstance(
            axis, ast.Constant | ast.UnaryOp)):
        return None
    if ast.unparse(axis) not in ("1", "-1"):
        return None
    parts = [_shape(tree, e, names, define, depth - 1) for e in values.elts]
    if any(p is None or p[0] != 2 for p in parts):
        return None
    widths = [p[1].value if isinstance(p[1], ast.Constant) else None for p in parts]
    return 2, None if None in widths else ast.Constant(sum(widths))
