"""Whether the source proves a batched target's samples independent: row s of `u` computed
from row s of `x` alone.

A per-dimension Laplacian loop differentiates the batch sum of `u`, so where samples
interact (a batch mean, batch norm in training mode) its terms mix them, and only the
products of that summed gradient keep its values. Where every op from `x` to `u` works
row by row (elementwise functions, arithmetic with tensors that do not depend on `x`,
products with such weights on the right, reductions and concatenations along other axes
than the batch, `tf.layers.dense`), each sample's own Laplacian is the loop's term, and
`cg.batch_laplacian(u, x)` computes it by the fastest route. Anything else is a doubt,
and a doubt is a no."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import shapes
from compat_grads.migrate.names import Names

# Calls that make tensors of their own: they do not depend on `x`.
_FRESH = frozenset(f"tf.{n}" for n in (
    "placeholder placeholder_with_default constant ones zeros fill Variable get_variable "
    "random_normal random_uniform truncated_normal random.normal random.uniform "
    "random.truncated_normal"
).split())
# Calls whose result's row s is computed from row s of their first argument alone (their
# other arguments, if any, must not depend on `x`).
_ROW_WISE = frozenset({"tf.matmul", "tf.layers.dense", "tf.nn.bias_add"})
_REDUCTIONS = frozenset(f"tf.reduce_{r}" for r in (
    "sum", "mean", "max", "min", "prod", "logsumexp"))


class Samples:
    """The module's proofs about the rows of one batched source `x`.

    Args:
      tree: the module.
      x: the source, as the loop writes it.
      names: the module's bindings.
      define: the value a name or attribute means where the target is read.
    """

    def __init__(self, tree: ast.Module, x: ast.expr, names: Names, define: shapes.Define):
        self.tree, self.x, self.names, self.define = tree, x, names, define

    def independent(self, node: ast.expr, depth: int = shapes.DEPTH) -> bool:
        """Whether row s of `node` provably depends on row s of `x` alone (and on nothing
        else that depends on `x`); `depth` bounds the definitions followed from names."""
        if depth < 0:
            return False
        if ast.dump(node) == ast.dump(self.x):
            return True
        if isinstance(node, ast.Name | ast.Attribute):
            value = self.define(node)
            return value is not None and self.independent(value, depth - 1)
        return bool(self._row_wise(node, depth))

    def _row_wise(self, node: ast.expr, depth: int) -> bool | None:
        """`independent` for the ops that keep rows apart, None for any other node."""
        def rows(n):
            return self.independent(n, depth)

        def free(n):
            return self.free(n, depth)

        if isinstance(node, ast.UnaryOp):
            return rows(node.operand)
        if isinstance(node, ast.BinOp):
            sides = (node.left, node.right)
            return any(rows(n) for n in sides) and all(rows(n) or free(n) for n in sides)
        if isinstance(node, ast.Subscript):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            whole = isinstance(first, ast.Slice) and (
                first.lower is first.upper is first.step is None)
            return whole and rows(node.value)
        name = self.names.qualname(node) if isinstance(node, ast.Call) else None
        if name is None or any(isinstance(a, ast.Starred) for a in node.args) or not node.args:
            return None
        if name in shapes.SAME_SHAPE:
            return len(node.args) == 1 and rows(node.args[0])
        if name in _ROW_WISE:
            plain = name != "tf.matmul" or not node.keywords  # transpose_a mixes rows
            return plain and rows(node.args[0]) and all(free(a) for a in node.args[1:2])
        if name in _REDUCTIONS or name == "tf.expand_dims":
            axis = (pt.call_args(node, ("input", "axis")) or [None, None])[1]
            new = name == "tf.expand_dims"
            return self._beyond_batch(axis, node.args[0], new) and rows(node.args[0])
        if name == "tf.concat":
            args = pt.call_args(node, ("values", "axis")) or [None, None]
            parts = args[0].elts if isinstance(args[0], ast.List | ast.Tuple) else None
            return bool(parts) and self._beyond_batch(args[1], parts[0]) and all(
                rows(p) or free(p) for p in parts) and any(rows(p) for p in parts)
        return None

    def free(self, node: ast.expr, depth: int) -> bool:
        """Whether `node` provably does not depend on `x`: a constant, a fresh tensor, or
        TensorFlow ops and arithmetic of such (an op's result depends on its inputs only)."""
        x = self.x
        if depth < 0 or ast.dump(node) == ast.dump(x):
            return False
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name | ast.Attribute):
            value = self.define(node)
            return value is not None and self.free(value, depth - 1)
        if isinstance(node, ast.Call) and self.names.qualname(node) in _FRESH:
            return not any(ast.dump(n) == ast.dump(x) for n in ast.walk(node))
        parts = _operands(node, self.names)
        return parts is not None and all(self.free(n, depth) for n in parts)

    def _beyond_batch(self, axis: ast.expr | None, of: ast.expr, new: bool = False) -> bool:
        """An int axis other than the batch's of `of`: k >= 1, or -k where `of` provably
        has more than k axes (at least k, for the `new` axis of `tf.expand_dims`)."""
        if isinstance(axis, ast.UnaryOp) and isinstance(axis.op, ast.USub):
            k = axis.operand.value if isinstance(axis.operand, ast.Constant) else None
            found = shapes.rank(self.tree, of, self.names, self.define)
            return type(k) is int and found is not None and found + new > k
        return isinstance(axis, ast.Constant) and type(axis.value) is int and axis.value >= 1


def _operands(node: ast.expr, names: Names) -> list[ast.expr] | None:
    """The operands of arithmetic, a literal list or tuple, or a TensorFlow op call (its
    arguments and keyword values); None for anything else (a user's call may read `x`)."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.List | ast.Tuple):
        return list(node.elts)
    if isinstance(node, ast.Call) and names.qualname(node) is not None:
        return [*node.args, *(k.value for k in node.keywords)]
    return None
