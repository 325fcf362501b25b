"""Static shapes the source proves: ranks, and dimensions where they are written out.

A rewrite of a per-dimension loop is the same program only when `x` has rank 2 (a column
`x[:, i]` of a rank-3 `x` is a slab, and the loop's terms are then not diagonal elements)
and, for the count of the loop, when that count is `x`'s width; a rewrite may drop the
row sums of a target that is provably a vector, call `cg.batch_laplacian` on a target
provably of shape `[b]` or `[b, 1]`, `cg.hessian` on a provable vector of weights, and
`cg.hvp` on a vector provably shaped like its weights. The source proves them only from
one definition (a name or an attribute such as `self.x_tf`, assigned once in the module)
by a call whose shape is written out: `tf.placeholder(tf.float32, [None, d])`, `tf.ones([b,
d])` and the like, `tf.reshape(t, [b, d])`, `tf.Variable` of such, or ops whose shape
follows by rule: elementwise functions, arithmetic with a number or between tensors of
one proved shape, int indexing, `tf.reduce_*` over one int axis, `tf.expand_dims`,
`tf.matmul` of matrices, and a `tf.concat` along axis 1 of matrices (a PINN's
`tf.concat([x, t], 1)`)."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.names import Names

# Calls whose shape argument (the first, or `shape=`) is the result's shape.
_SHAPED = {"tf.placeholder": 1, "tf.ones": 0, "tf.zeros": 0, "tf.fill": 0,
           "tf.random.normal": 0, "tf.random.uniform": 0, "tf.random.truncated_normal": 0,
           "tf.random_normal": 0, "tf.random_uniform": 0, "tf.truncated_normal": 0,
           "tf.reshape": 1, "tf.get_variable": 1}
Define = Callable[[ast.expr], "ast.expr | None"]
Dims = tuple["ast.expr | None", ...]
DEPTH = 6  # definitions followed from a name: chains of a few assignments
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
           depth: int = DEPTH) -> Matrix | None:
    """What the module proves about `node` being rank 2, or None when it does not;
    `define(name)` is the value a name or attribute means where `node` is read."""
    found = dims(tree, node, names, define, depth)
    return Matrix(found[1]) if found is not None and len(found) == 2 else None


def rank(tree: ast.Module, node: ast.expr, names: Names, define: Define) -> int | None:
    """The rank of `node` when the module proves it (as `matrix` does), else None."""
    found = dims(tree, node, names, define, DEPTH)
    return len(found) if found is not None else None


def same_shape(tree: ast.Module, a: ast.expr, b: ast.expr, names: Names, define: Define) -> bool:
    """Whether the module proves `a` and `b` of one shape: every dimension of both written
    out, as the same constant or once-assigned name (or arithmetic of them)."""
    return _same(*(dims(tree, n, names, define, DEPTH) for n in (a, b)))


def dims(tree: ast.Module, node: ast.expr, names: Names, define: Define,
         depth: int) -> Dims | None:
    """The dimensions of `node` as its one definition writes them (each as `_width` reads
    it: None where not provable), through the ops that keep or change shapes by rule;
    None when even its rank is not proved. `depth` bounds the definitions followed."""
    if depth < 0:
        return None
    if isinstance(node, ast.Name | ast.Attribute):
        value = define(node)
        return dims(tree, value, names, define, depth - 1) if value is not None else None
    inner = functools.partial(dims, tree, names=names, define=define, depth=depth)
    if isinstance(node, ast.UnaryOp):
        return inner(node.operand)
    if isinstance(node, ast.BinOp):
        return _broadcast(inner, node.left, node.right)
    if isinstance(node, ast.Subscript):
        source = _differentiated(node, names)
        if source is not None:  # a gradient has its source's shape
            return inner(source)
        return _indexed(inner(node.value), node.slice)
    if not isinstance(node, ast.Call):
        return None
    name = names.qualname(node)
    if name in SAME_SHAPE:
        return inner(node.args[0]) if len(node.args) == 1 and not node.keywords else None
    if name in _BY_RULE:
        return _BY_RULE[name](node, inner)
    if name not in _SHAPED:
        return None
    shape = _shape_argument(node, name)
    if not isinstance(shape, ast.List | ast.Tuple) or any(
            isinstance(e, ast.Starred) for e in shape.elts):
        return None
    return tuple(_width(tree, e) for e in shape.elts)


def _differentiated(node: ast.Subscript, names: Names) -> ast.expr | None:
    """`x` of `tf.gradients(ys, x)[0]` (one source), or `xs[k]` of `tf.gradients(ys, [...,
    xs[k], ...])[k]`."""
    grad = pt.indexed_grad(node, names)
    xs = grad.xs if grad is not None else None
    if isinstance(xs, ast.List | ast.Tuple):
        ok = grad.index < len(xs.elts) and not any(isinstance(e, ast.Starred) for e in xs.elts)
        return xs.elts[grad.index] if ok else None
    return xs if grad is not None and grad.index == 0 else None


def _same(a: Dims | None, b: Dims | None) -> bool:
    """Whether two proved shapes are one, every dimension known."""
    return (a is not None and b is not None and len(a) == len(b) and all(
        d is not None and e is not None and ast.dump(d) == ast.dump(e) for d, e in zip(a, b)))


def _broadcast(inner: Callable, left: ast.expr, right: ast.expr) -> Dims | None:
    """`a op b`: a number keeps the tensor's shape; two tensors broadcast as numpy does
    (the shorter shape padded with 1s on the left), each dimension `_joined`."""
    for number, other in ((left, right), (right, left)):
        if isinstance(number, ast.Constant) and type(number.value) in (int, float):
            return inner(other)
    a, b = inner(left), inner(right)
    if a is None or b is None:
        return None
    one = ast.Constant(1)
    a, b = ((one,) * (len(b) - len(a)) + a, (one,) * (len(a) - len(b)) + b)
    return tuple(_joined(d, e) for d, e in zip(a, b))


def _joined(d: ast.expr | None, e: ast.expr | None) -> ast.expr | None:
    """One dimension of a broadcast: where one side is 1 (or unknown), the other's."""
    def is_one(n):
        return isinstance(n, ast.Constant) and n.value == 1
    if d is not None and e is not None and ast.dump(d) == ast.dump(e):
        return d
    if is_one(d) or is_one(e):
        return e if is_one(d) else d
    known = [n for n in (d, e) if n is not None]
    return known[0] if len(known) == 1 else None


def _indexed(found: Dims | None, index: ast.expr) -> Dims | None:
    """`t[k]`, `t[:, k]`: each int index drops its axis, each `:` keeps it."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    if found is None or len(parts) > len(found):
        return None
    kept = []
    for part, dim in zip(parts, found):
        if isinstance(part, ast.Slice) and part.lower is part.upper is part.step is None:
            kept.append(dim)
        elif _int(part) is None:
            return None
    return (*kept, *found[len(parts):])


def _reduced(call: ast.Call, inner: Callable) -> Dims | None:
    """`tf.reduce_*(t, axis=k)` with an int k and no keepdims: t's shape without axis k;
    without an axis, a scalar."""
    args = pt.call_args(call, ("input_tensor", "axis"))
    extra = {k.arg for k in call.keywords} - {"input_tensor", "axis"}
    if not args or args[0] is None or extra or len(call.args) > 2:
        return None
    if args[1] is None:
        return ()
    found, k = inner(args[0]), _int(args[1])
    if found is None or k is None or not -len(found) <= k < len(found):
        return None
    k %= len(found)
    return (*found[:k], *found[k + 1:])


def _expanded(call: ast.Call, inner: Callable) -> Dims | None:
    """`tf.expand_dims(t, k)`: a new axis of size 1 at k."""
    args = pt.call_args(call, ("input", "axis"))
    if not args or args[0] is None or len(call.args) + len(call.keywords) != 2:
        return None
    found, k = inner(args[0]), _int(args[1])
    if found is None or k is None or not -len(found) - 1 <= k <= len(found):
        return None
    k %= len(found) + 1
    return (*found[:k], ast.Constant(1), *found[k:])


def _product(call: ast.Call, inner: Callable) -> Dims | None:
    """`tf.matmul(a, b)` of two matrices: `[a.shape[0], b.shape[1]]`."""
    if len(call.args) != 2 or call.keywords:
        return None
    a, b = inner(call.args[0]), inner(call.args[1])
    return (a[0], b[1]) if a is not None and b is not None and len(a) == len(b) == 2 else None


def _variable(call: ast.Call, inner: Callable) -> Dims | None:
    """`tf.Variable(initial, ...)`: the initial value's shape (no `shape=` relaxing it)."""
    args = pt.call_args(call, ("initial_value",))
    if not args or args[0] is None or any(k.arg == "shape" for k in call.keywords):
        return None
    return inner(args[0])


def _int(node: ast.expr | None) -> int | None:
    """The int a literal `k` or `-k` stands for."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return -value if value is not None else None
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


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
    loop count of that name is the same value wherever it is read), or arithmetic of them
    (FermiNet's `3 * n`)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
        parts = (_width(tree, node.left), _width(tree, node.right))
        return node if None not in parts else None
    parameter = any(isinstance(a, ast.arg) and a.arg == getattr(node, "id", None)
                    for a in ast.walk(tree))
    once = isinstance(node, ast.Name) and stores(tree, node) == 1 and not parameter
    return node if once else None


def _concat(call: ast.Call, inner: Callable) -> Dims | None:
    """`tf.concat([a, b, ...], 1)` (or axis -1) of rank-2 parts: rank 2, its width their
    sum when every part's width is an int constant."""
    args = pt.call_args(call, ("values", "axis"))
    values, axis = (args[0], args[1]) if args else (None, None)
    if not (isinstance(values, ast.List | ast.Tuple) and values.elts and _int(axis) in (1, -1)):
        return None
    parts = [inner(e) for e in values.elts]
    if any(p is None or len(p) != 2 for p in parts):
        return None
    widths = [p[1].value if isinstance(p[1], ast.Constant) else None for p in parts]
    return None, None if None in widths else ast.Constant(sum(widths))


# Ops whose result has their one argument's shape.
SAME_SHAPE = frozenset(f"tf.{n}" for n in (
    "sin cos tanh exp log sigmoid square sqrt abs negative identity stop_gradient "
    "nn.relu nn.sigmoid nn.tanh nn.softplus nn.elu math.sin math.cos math.tanh math.exp "
    "math.log math.sigmoid math.square math.sqrt math.abs math.negative"
).split())
# Ops whose result's shape follows from their arguments' by a rule.
_BY_RULE = {"tf.concat": _concat, "tf.expand_dims": _expanded, "tf.matmul": _product,
            "tf.Variable": _variable,
            **dict.fromkeys((f"tf.reduce_{r}" for r in ("sum", "mean", "max", "min", "prod")),
                            _reduced)}
