"""The parts of the legacy idioms, and the rewrites whose meaning is provably the same.

`tf.gradients(y[i], x)[0]` is the gradient of SUM(y[i]), so a loop over rows of a rank-k `y`
is the Jacobian of the row sums, not of `y`: every rewrite here sums the rows (or columns)
first, which is exact for any rank and a no-op for a vector."""

from __future__ import annotations

import ast
import dataclasses

from compat_grads.migrate.names import Names

# Keyword arguments of tf.gradients / tf.hessians that do not change the values.
NEUTRAL_KWARGS = frozenset({"name", "colocate_gradients_with_ops", "gate_gradients",
                            "aggregation_method"})
# Ops that are safe to build twice: a rewrite may mention their result more than once.
_PURE_CALLS = frozenset(f"tf.{n}" for n in (
    "squeeze reshape transpose identity cast expand_dims concat stack matmul reduce_sum "
    "reduce_mean exp log sin cos tanh square sqrt abs gather unstack"
).split())
_PURE_BUILTINS = frozenset({"len", "int"})
# Fresh tensors of a target's shape: `tf.ones_like(y)`, or `tf.ones(tf.shape(y))`.
_LIKE_CALLS = frozenset({"tf.ones_like", "tf.zeros_like"})
_SHAPED_CALLS = frozenset({"tf.ones", "tf.zeros", "tf.fill"})


@dataclasses.dataclass(frozen=True)
class Grad:
    """`tf.gradients(ys, xs)[index]`, with `clean` False when other arguments matter."""

    call: ast.Call
    ys: ast.expr
    xs: ast.expr
    index: int | None
    clean: bool


@dataclasses.dataclass(frozen=True)
class Rows:
    """The slices of `array` along `axis` (0 rows, 1 columns): the first `count`, or all."""

    array: ast.expr
    axis: int
    count: ast.expr | None


def call_args(call: ast.Call, names: tuple[str, ...]) -> list[ast.expr | None] | None:
    """The arguments `names` of `call`, positional or keyword; None for `*args` / `**kw`."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    return [call.args[i] if i < len(call.args) else keywords.get(name)
            for i, name in enumerate(names)]


def grad_parts(call: ast.Call) -> tuple[ast.expr, ast.expr, bool] | None:
    """(ys, xs, clean) of a tf.gradients / tf.hessians call."""
    args = call_args(call, ("ys", "xs"))
    if args is None or None in args:
        return None
    extra = {k.arg for k in call.keywords} - {"ys", "xs"}
    return args[0], args[1], len(call.args) <= 2 and extra <= NEUTRAL_KWARGS


def indexed_grad(node: ast.AST, names: Names) -> Grad | None:
    """`tf.gradients(ys, xs)[k]` with a constant k, or None."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
            and names.qualname(node.value) == "tf.gradients"):
        return None
    index, parts = node.slice, grad_parts(node.value)
    if parts is None or not (isinstance(index, ast.Constant) and type(index.value) is int):
        return None
    return Grad(node.value, parts[0], parts[1], index.value, parts[2])


def _full_slice(node: ast.expr) -> bool:
    """`:` only: an Ellipsis (`y[..., i]`) indexes the LAST axis, not axis 0 or 1."""
    return isinstance(node, ast.Slice) and node.lower is node.upper is node.step is None


def index_rows(target: ast.expr, var: str, count: ast.expr | None, names: Names,
               proven: bool = False) -> Rows | None:
    """`y[i]` / `y[i, :]` (rows) or `y[:, i]` (columns) with `i` running over `range(count)`,
    for a `y` that is provably one tensor (a list's `.shape` or mixed-shape rows would break
    the rewrite; `proven`: the caller proved it) and a `count` that may be evaluated twice.
    `tf.gather(y, i)` is `y[i]`."""
    if count is not None and not is_pure_count(count, names):
        return None
    array = gathered(target, var, names)
    if array is not None:  # a list too: the rewrite's reduce_sum stacks it as tf.gather does
        return Rows(array, 0, count) if is_pure(array, names) else None
    if not (isinstance(target, ast.Subscript) and is_pure(target.value, names)
            and (proven or names.is_tensor(target.value))):
        return None
    index = target.slice
    elts = index.elts if isinstance(index, ast.Tuple) else [index]
    spots = [i for i, e in enumerate(elts) if isinstance(e, ast.Name) and e.id == var]
    if spots not in ([0], [1]) or not all(_full_slice(e) for i, e in enumerate(elts)
                                          if i != spots[0]):
        return None
    return Rows(target.value, spots[0], count)


def unstack_rows(target: ast.expr, var: str, iterable: ast.expr, names: Names) -> Rows | None:
    """`yi` running over `tf.unstack(y)` (rows) or `tf.unstack(y, axis=1)` (columns)."""
    if not (isinstance(target, ast.Name) and target.id == var and isinstance(iterable, ast.Call)
            and names.qualname(iterable) == "tf.unstack"):
        return None
    args = call_args(iterable, ("value", "num", "axis"))
    if args is None or args[0] is None or not (
            is_pure(args[0], names) or _is_pure_gradient(args[0], names)):
        return None
    axis = args[2].value if isinstance(args[2], ast.Constant) else (0 if args[2] is None else -1)
    return Rows(args[0], axis, None) if axis in (0, 1) else None


def gathered(target: ast.expr, var: str, names: Names) -> ast.expr | None:
    """`y` of `tf.gather(y, var)` (axis 0, nothing else)."""
    ok = (isinstance(target, ast.Call) and names.qualname(target) == "tf.gather"
          and len(target.args) == 2 and not target.keywords
          and isinstance(target.args[1], ast.Name) and target.args[1].id == var)
    return target.args[0] if ok else None


def _is_pure_gradient(node: ast.expr, names: Names) -> bool:
    """`tf.gradients(ys, xs)[k]` of pure operands: building it again gives the same tensor
    (the rewrite of `tf.unstack(tf.gradients(y, x)[0])` mentions it twice)."""
    grad = indexed_grad(node, names)
    return grad is not None and grad.clean and is_pure(grad.ys, names) and is_pure(
        grad.xs, names)


def range_count(iterable: ast.expr, names: Names, tf_range: bool = False) -> ast.expr | None:
    """`n` of `range(n)` (or `tf.range(n)` when `tf_range`), else None."""
    if not isinstance(iterable, ast.Call) or iterable.keywords or len(iterable.args) != 1:
        return None
    func = iterable.func
    if tf_range:
        return iterable.args[0] if names.qualname(iterable) == "tf.range" else None
    builtin = isinstance(func, ast.Name) and func.id == "range" and "range" not in names.bound
    return iterable.args[0] if builtin else None


def is_pure_count(node: ast.expr, names: Names) -> bool:
    """Whether a loop count is safe to copy into a rewrite (where it may be evaluated twice):
    names, constants, attribute / subscript chains, arithmetic, `len(...)`, `int(...)`,
    `tf.shape(...)`, `x.get_shape()`, `.as_list()`; never any other call."""
    if isinstance(node, ast.Name | ast.Constant):
        return True
    if isinstance(node, ast.Attribute):
        return is_pure_count(node.value, names)
    if isinstance(node, ast.Subscript):
        return is_pure_count(node.value, names) and is_pure_count(node.slice, names)
    if isinstance(node, ast.BinOp):
        return is_pure_count(node.left, names) and is_pure_count(node.right, names)
    if isinstance(node, ast.UnaryOp):
        return is_pure_count(node.operand, names)
    if not isinstance(node, ast.Call) or node.keywords or any(
            isinstance(a, ast.Starred) for a in node.args):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS and func.id not in names.bound:
        return len(node.args) == 1 and is_pure_count(node.args[0], names)
    if names.qualname(node) == "tf.shape":
        return len(node.args) == 1 and is_pure_count(node.args[0], names)
    return _is_shape_call(node) and not node.args and is_pure_count(func.value, names)


def is_pure(node: ast.expr, names: Names) -> bool:
    """Whether building `node` twice is the same as once: names, indexing, arithmetic, a few
    stateless TensorFlow ops; never a user call (it could create variables)."""
    if isinstance(node, ast.Call):
        name = names.qualname(node)
        builtin = (isinstance(node.func, ast.Name) and node.func.id in _PURE_BUILTINS
                   and node.func.id not in names.bound)
        if not (builtin or name in _PURE_CALLS or _is_shape_call(node)):
            return False
    elif not isinstance(node, ast.Name | ast.Constant | ast.Attribute | ast.Subscript | ast.Slice
                        | ast.Tuple | ast.List | ast.BinOp | ast.UnaryOp | ast.keyword
                        | ast.Load | ast.operator | ast.unaryop):
        return False
    return all(is_pure(child, names) for child in ast.iter_child_nodes(node)
               if not isinstance(child, ast.expr_context))


def shaped_like(value: ast.expr, target: ast.expr, names: Names) -> bool:
    """Whether `value` is a new tensor of `target`'s shape: `tf.ones_like(target)`,
    `tf.zeros_like(target)`, or `tf.ones` / `tf.zeros` / `tf.fill` of `tf.shape(target)`.

    The double-gradient trick's result is linear in its dummy, so it is the same for every
    value of one of these: what matters is the shape (a broadcastable dummy, such as a
    placeholder of shape [None, 1] for a target [n, 3], gives a dummy-shaped result)."""
    if not (isinstance(value, ast.Call) and value.args) or isinstance(value.args[0], ast.Starred):
        return False
    name, first = names.qualname(value), value.args[0]
    if name in _SHAPED_CALLS:
        shaped = (isinstance(first, ast.Call) and names.qualname(first) == "tf.shape"
                  and len(first.args) == 1)
        first = first.args[0] if shaped else None
    elif name not in _LIKE_CALLS:
        return False
    return first is not None and ast.dump(first) == ast.dump(target)


def _is_shape_call(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr in ("get_shape", "as_list")


def covers(count: ast.expr, rows: Rows, names: Names) -> bool:
    """Whether `count` is the length of `rows.array` along the axis (`y.shape[0]`, ...)."""
    if isinstance(count, ast.Call) and isinstance(count.func, ast.Name) and len(count.args) == 1:
        if count.func.id == "len" and rows.axis == 0:
            return ast.dump(count.args[0]) == ast.dump(rows.array)
        return count.func.id == "int" and covers(count.args[0], rows, names)
    if not (isinstance(count, ast.Subscript) and isinstance(count.slice, ast.Constant)
            and count.slice.value == rows.axis):
        return False
    base = count.value
    if isinstance(base, ast.Call) and names.qualname(base) == "tf.shape" and base.args:
        return ast.dump(base.args[0]) == ast.dump(rows.array)
    while isinstance(base, ast.Call) and _is_shape_call(base):
        base = base.func.value
    if isinstance(base, ast.Attribute) and base.attr == "shape":
        base = base.value
    return base is not count.value and ast.dump(base) == ast.dump(rows.array)


class Writer:
    """Builds rewrite text from the original source segments.

    Args:
      source: the module text.
      names: its bindings.
      tf: the local name of the TensorFlow module.
      cg: the local name of compat_grads.
    """

    def __init__(self, source: str, names: Names, tf: str, cg: str):
        self.source, self.names, self.tf, self.cg = source, names, tf, cg

    def text(self, node: ast.AST) -> str:
        """The source text of `node`, parenthesized when it spans several lines."""
        segment = ast.get_source_segment(self.source, node)
        return f"({segment})" if "\n" in segment else segment

    def rows(self, rows: Rows, vector: bool = False) -> str:
        """An expression whose element i is the sum of row (or column) i of the array: the
        array itself when it is a `vector` (the shapes prove its rank 1), whose rows are
        its elements."""
        array = self.text(rows.array)
        if rows.count is not None and not covers(rows.count, rows, self.names):
            count = self.text(rows.count)
            array = f"{array}[:{count}]" if rows.axis == 0 else f"{array}[:, :{count}]"
        if vector and rows.axis == 0:
            return array
        # tf.rank works for an unknown rank too (`.shape.ndims` would be None there), and
        # reduce_sum still infers the static shape where the rank is known.
        tf = self.tf
        axes = (f"{tf}.range(1, {tf}.rank({array}))" if rows.axis == 0
                else f"{tf}.concat([[0], {tf}.range(2, {tf}.rank({array}))], 0)")
        return f"{tf}.reduce_sum({array}, axis={axes})"

    def total(self, ys: ast.expr, value: ast.expr | None = None) -> str:
        """The scalar whose gradient `tf.gradients(ys, x)` is: `ys` when it (or its `value`,
        for a name) is a `tf.reduce_sum` or `tf.reduce_mean` over every axis, else its sum."""
        value = ys if value is None else value
        scalar = (isinstance(value, ast.Call) and self.names.qualname(value) in (
            "tf.reduce_sum", "tf.reduce_mean") and len(value.args) == 1 and not value.keywords)
        return self.text(ys) if scalar else f"{self.tf}.reduce_sum({self.text(ys)})"

    def source_of(self, grad: Grad) -> str | None:
        """The one source `tf.gradients(ys, xs)[k]` differentiates with respect to."""
        xs = grad.xs
        if isinstance(xs, ast.List | ast.Tuple):
            elts = xs.elts
            ok = grad.index < len(elts) and not any(isinstance(e, ast.Starred) for e in elts)
            return self.text(elts[grad.index]) if ok else None
        if grad.index == 0 and self.names.is_tensor(xs):
            return self.text(xs)
        return f"{self.tf}.nest.flatten({self.text(xs)})[{grad.index}]"

    def call(self, function: str, *args: str) -> str:
        """`cg.function(args...)`."""
        return f"{self.cg}.{function}({', '.join(args)})"
