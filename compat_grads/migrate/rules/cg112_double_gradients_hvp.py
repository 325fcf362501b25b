"""CG112: a Hessian-vector product by double `tf.gradients`: the gradient of `g · v` with
`g = tf.gradients(loss, w)[0]`, as `cg.hvp`'s "Before" and TensorFlow's private
`_hessian_vector_product` (which influence-function code copies) write it."""

from __future__ import annotations

import ast
import dataclasses

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rebinding, shapes
from compat_grads.migrate.context import Context, names_in, reduce_sum_of
from compat_grads.migrate.findings import Edit, Finding, Rule
from compat_grads.migrate.names import Names

DOCS = """\
The gradient of the product of a gradient with a vector is the Hessian times that vector:

.. code-block:: python

   x = tf.placeholder(tf.float32, [None, 3])
   w = tf.Variable(tf.ones([3]))
   v = tf.placeholder(tf.float32, [3])
   loss = tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)
   g = tf.gradients(loss, w)[0]
   hv = tf.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), w)[0]
   # --fix:
   hv = cg.hvp(lambda w: tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2), w,
               tf.stop_gradient(v))

Found as ``tf.reduce_sum(g * v)`` (either order), ``tf.reduce_sum(tf.multiply(g, v))``
and ``tf.tensordot(g, v, k)``, ``v`` with or without ``tf.stop_gradient``, ``g`` inline or
a name bound once to ``tf.gradients(loss, w)[0]`` of the same ``w``; and the form over
lists of variables and vectors of TensorFlow's private ``_hessian_vector_product``:

.. code-block:: python

   def hessian_vector_product(ys, xs, vs):
       grads = tf.gradients(ys, xs)
       elemwise = [tf.multiply(g, tf.stop_gradient(v)) for g, v in zip(grads, vs)
                   if g is not None]
       return tf.gradients(elemwise, xs)

in the private spellings copied from TensorFlow too (``gradients_impl.gradients``,
``math_ops.multiply``, ``array_ops.stop_gradient``), and summed in the gradient's list
(``tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, vs)])``). The gradient of such a
product with respect to another tensor than the first gradient's (influence functions'
gradient of ``g · v`` with respect to the input) is a mixed second derivative, not a
Hessian-vector product: it is not reported.

:func:`~compat_grads.hvp` takes the loss as a function of the weights, ``cg.hvp(f, w,
v)``, in every mode (the double ``tf.gradients`` works in graphs only): in a graph it
builds that same gradient of ``<gradient, v>``, in eager code one forward-over-reverse
product. ``--fix`` writes ``f`` as a lambda of the loss's own expression when the
source proves the call the same:

- ``tf.gradients`` has no arguments that change its values, ``w`` is one name bound once,
  and the result is taken with ``[0]`` (or not indexed: then a list of one, as
  ``tf.gradients`` returns);
- ``v`` is independent of ``w``: ``tf.stop_gradient(...)``, or a placeholder, constant or
  fresh tensor (``tf.ones_like(w)``, ``tf.random.normal(...)``); it is written as it is,
  so a ``tf.stop_gradient`` stays;
- ``v`` has ``w``'s shape as the source writes them (``g * v`` would broadcast another);
  ``tf.tensordot`` contracts every axis of ``w``;
- the loss is an expression of ``w`` and of names bound once to placeholders, constants or
  numbers (then the lambda computes the same loss from its argument); a loss that is not a
  scalar by its expression is summed, as ``tf.gradients`` sums it.

Anything else is reported only, and says how to write ``f``: where the loss is a parameter
of the function around the product (a helper such as ``hessian_vector_product(ys, xs,
v)``), at the helper's callers, which build the loss. Where the loss does not reach
``w`` twice (a loss linear in ``w``) ``tf.gradients`` gives ``None`` and ``cg.hvp`` zeros.
"""

WHY_NOT = {
    "arguments": "tf.gradients has arguments that change its values (grad_ys, ...)",
    "index": "the result is taken with another index than [0]",
    "lists": ("{w} is a list of variables: cg.hvp(f, {w}, {v}) takes it, with f({w}) the "
              "loss as a function of the list and {v} shaped like {w}, which the source does "
              "not prove"),
    "vector": ("{v} is not provably independent of {w} (tf.stop_gradient(...), a placeholder, "
               "a constant): its own gradient would add a term"),
    "shape": ("{v} is not provably of {w}'s shape (both written out alike, or "
              "tf.ones_like({w})): a broadcast product is another vector"),
    "helper": ("{loss} is a parameter of {fn}, so the loss is built where {fn} is called: "
               "there, write it as a function of the weights, def loss_fn({p}): ... return "
               "loss (the ops from {p}, a list where {fn} is given one, to the loss), and "
               "call cg.hvp(loss_fn, {w}, {v}) in place of {call}"),
    "function": ("{loss} is not an expression of {w} and of placeholders or constants bound "
                 "once, so the source has no function of {w} to pass: write the ops from {w} "
                 "to the loss as def loss_fn({p}): ... return loss, then cg.hvp(loss_fn, {w}, "
                 "{v})"),
}
# Tensors that do not depend on any variable: a vector or an operand of the loss may be one.
_FRESH = frozenset(f"tf.{n}" for n in (
    "placeholder placeholder_with_default constant ones zeros fill ones_like zeros_like "
    "random_normal random_uniform truncated_normal random.normal random.uniform "
    "random.truncated_normal"
).split())


@dataclasses.dataclass(frozen=True)
class Product:
    """`g · v` differentiated with respect to `w`: `grad` the inner `tf.gradients(loss,
    w)[0]`, `vector` the other factor as written, `axes` tensordot's (else None)."""

    grad: pt.Grad
    vector: ast.expr
    axes: ast.expr | None = None


def check(ctx: Context, call: ast.Call) -> list[Finding]:
    """CG112 at the outer `tf.gradients` of a Hessian-vector product."""
    parts = pt.grad_parts(call)
    if parts is None:
        return []
    product = _product(ctx, call, parts[0], parts[1])
    if product is None:
        return _listed(ctx, call, parts)
    ctx.handled |= {id(call), id(product.grad.call)}
    key, edits = _why_not(ctx, call, parts, product), ()
    if not key:
        edits = _edits(ctx, call, product)
    use = edits[0].text if edits else _advice(product)
    grad = product.grad
    why = f" (not rewritten: {_reason(ctx, call, key, grad.xs, product.vector, grad.ys)})" if (
        key) else ""
    return [ctx.finding(call, RULE.code, RULE.message("hvp", use=use, why=why), edits)]


# -- the form --------------------------------------------------------------------------------

def _product(ctx: Context, at: ast.AST, ys: ast.expr, xs: ast.expr) -> Product | None:
    """`ys` as `g · v` with `g` a gradient with respect to `xs`, or None."""
    names = ctx.names
    summed = reduce_sum_of(ys, names)
    factors = _factors(summed, names) if summed is not None else None
    axes = None
    if factors is None and isinstance(ys, ast.Call) and names.qualname(ys) == "tf.tensordot":
        args = pt.call_args(ys, ("a", "b", "axes"))
        factors, axes = (args[:2], args[2]) if args and None not in args else (None, None)
    for g, v in (factors, factors[::-1]) if factors else ():
        grad = _gradient_of(ctx, at, g)
        if grad is not None and ast.dump(grad.xs) == ast.dump(xs):
            return Product(grad, v, axes)
    return None


def _factors(node: ast.expr, names: Names) -> list[ast.expr] | None:
    """The two factors of `a * b` or `tf.multiply(a, b)`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return [node.left, node.right]
    if isinstance(node, ast.Call) and names.qualname(node) in ("tf.multiply", "tf.math.multiply"):
        args = pt.call_args(node, ("x", "y"))
        return args if args and None not in args and len(node.keywords) <= 1 else None
    return None


def _gradient_of(ctx: Context, at: ast.AST, node: ast.expr) -> pt.Grad | None:
    """`tf.gradients(loss, w)[0]`, inline or the one value of a name read at `at`."""
    node = _named(ctx, at, node)
    grad = pt.indexed_grad(node, ctx.names) if node is not None else None
    return grad if grad is not None and grad.index == 0 else None


def _named(ctx: Context, at: ast.AST, node: ast.expr) -> ast.expr | None:
    """`node`, or the one value of the name `node` where `at` reads it."""
    return rebinding.value_at(ctx, at, node.id) if isinstance(node, ast.Name) else node


def _listed(ctx: Context, call: ast.Call, parts: tuple) -> list[Finding]:
    """`tf.gradients([g * v for g, v in zip(grads, vs)], xs)`, `grads = tf.gradients(ys,
    xs)` (or the products summed, `tf.add_n([tf.reduce_sum(g * v) ...])`): the private
    `_hessian_vector_product` over lists, reported only. A first gradient with respect to
    other sources than `xs` makes a mixed second derivative: no finding."""
    comp = _named(ctx, call, parts[0])
    if isinstance(comp, ast.Call) and ctx.names.qualname(comp) == "tf.add_n" and len(
            comp.args) == 1 and not comp.keywords:
        comp = _named(ctx, call, comp.args[0])
    gen = comp.generators[0] if isinstance(comp, ast.ListComp) and len(
        comp.generators) == 1 else None
    pair = gen.target.elts if gen and isinstance(gen.target, ast.Tuple) else []
    zipped = gen.iter if gen and isinstance(gen.iter, ast.Call) else None
    if len(pair) != 2 or not (zipped and isinstance(zipped.func, ast.Name)
                              and zipped.func.id == "zip" and len(zipped.args) == 2):
        return []
    grads = _named(ctx, call, zipped.args[0])
    inner = pt.grad_parts(grads) if ctx.is_gradients(grads) else None
    summed = reduce_sum_of(comp.elt, ctx.names)
    factors = _factors(comp.elt if summed is None else summed, ctx.names)
    if inner is None or factors is None or ast.dump(inner[1]) != ast.dump(parts[1]) or (
            names_in(factors[0]) | names_in(factors[1])) < {n.id for n in pair}:
        return []
    ctx.handled |= {id(call), id(grads)}
    key = "helper" if _helper(ctx, call, inner[0]) is not None else "lists"
    why = _reason(ctx, call, key, parts[1], zipped.args[1], inner[0])
    use = f"cg.hvp(f, {ast.unparse(parts[1])}, {ast.unparse(zipped.args[1])})"
    return [ctx.finding(call, RULE.code, RULE.message(
        "hvp", use=use, why=f" (not rewritten: {why})"))]


def _helper(ctx: Context, at: ast.AST, loss: ast.expr) -> ast.FunctionDef | None:
    """The function around `at` that takes the loss as a parameter: a helper whose callers
    build the loss (influence functions' `hessian_vector_product(ys, xs, v)`)."""
    scope = rebinding.binder(ctx, at, loss.id) if isinstance(loss, ast.Name) else None
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    params = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
    return scope if loss.id in params else None


# -- the rewrite -----------------------------------------------------------------------------

def _why_not(ctx: Context, call: ast.Call, parts: tuple, product: Product) -> str:
    """The key of WHY_NOT that keeps the product from being rewritten, "" when none does."""
    w = product.grad.xs
    if not (parts[2] and product.grad.clean):
        return "arguments"
    if _helper(ctx, call, product.grad.ys) is not None:
        return "helper"
    if isinstance(w, ast.List | ast.Tuple):
        return "lists"
    outer = ctx.parents.get(id(call))
    if isinstance(outer, ast.Subscript) and outer.value is call and not (
            isinstance(outer.slice, ast.Constant) and outer.slice.value == 0):
        return "index"
    if not _independent(ctx, call, product.vector):
        return "vector"
    if not _shaped(ctx, call, product):
        return "shape"
    return "" if _loss_expression(ctx, call, product) is not None else "function"


def _independent(ctx: Context, at: ast.AST, v: ast.expr) -> bool:
    """Whether `v` provably does not depend on any variable (nor on `w`)."""
    v = _named(ctx, at, v)
    return isinstance(v, ast.Call) and ctx.names.qualname(v) in _FRESH | {"tf.stop_gradient"}


def _shaped(ctx: Context, at: ast.AST, product: Product) -> bool:
    """Whether `v` has `w`'s shape, and tensordot's axes are all of them."""
    v, w = product.vector, product.grad.xs
    if isinstance(v, ast.Call) and ctx.names.qualname(v) == "tf.stop_gradient" and v.args:
        v = v.args[0]
    value = _named(ctx, at, v)
    define = rebinding.definer(ctx, at)
    same = (value is not None and pt.shaped_like(value, w, ctx.names)) or shapes.same_shape(
        ctx.tree, v, w, ctx.names, define)
    if product.axes is None or not same:
        return same
    axes = product.axes
    return isinstance(axes, ast.Constant) and axes.value == shapes.rank(
        ctx.tree, w, ctx.names, define)


def _loss_expression(ctx: Context, at: ast.AST, product: Product) -> ast.expr | None:
    """The loss as an expression of `w` (a name bound once) and of names bound once to
    fresh tensors or numbers: then a lambda of `w` computes it again from its argument."""
    loss, w = _named(ctx, at, product.grad.ys), product.grad.xs
    if loss is None or not isinstance(w, ast.Name) or rebinding.value_at(ctx, at, w.id) is None:
        return None
    others = names_in(loss) - {w.id} - set(ctx.names.aliases)
    operands = [rebinding.value_at(ctx, at, n) for n in others]
    fresh = all(isinstance(v, ast.Constant) or (isinstance(v, ast.Call) and ctx.names.qualname(
        v) in _FRESH) for v in operands)
    ok = w.id in names_in(loss) and fresh and pt.is_pure(loss, ctx.names)
    return loss if ok else None


def _edits(ctx: Context, call: ast.Call, product: Product) -> tuple[Edit, ...]:
    """`cg.hvp(lambda w: loss, w, v)` in place of the outer gradient (a list of it when it
    is not indexed)."""
    w, loss = ctx.writer, _loss_expression(ctx, call, product)
    if w is None:
        return ()
    name = product.grad.xs.id
    text = w.call("hvp", f"lambda {name}: {w.total(loss)}", name, w.text(product.vector))
    outer = ctx.parents.get(id(call))
    if isinstance(outer, ast.Subscript) and outer.value is call:
        return (ctx.replace(outer, text),)
    return (ctx.replace(call, f"[{text}]"),)


def _advice(product: Product) -> str:
    """`cg.hvp(f, w, v)` in the user's own names."""
    return f"cg.hvp(f, {ast.unparse(product.grad.xs)}, {ast.unparse(product.vector)})"


def _reason(ctx: Context, at: ast.AST, key: str, w: ast.expr, v: ast.expr,
            loss: ast.expr) -> str:
    """WHY_NOT[key] in the code's names (`w` the parameter of a `self.w`)."""
    helper = _helper(ctx, at, loss)
    fn = helper.name if helper else ""
    call = f"{fn}({', '.join(a.arg for a in helper.args.args)})" if helper else ""
    return WHY_NOT[key].format(w=ast.unparse(w), v=ast.unparse(v), loss=ast.unparse(loss),
                               p=w.id if isinstance(w, ast.Name) else "w", fn=fn, call=call)


RULE = Rule(
    code="CG112", name="double-gradients-hvp", fix="rewrite where the loss is an expression",
    summary=("tf.gradients of tf.reduce_sum(tf.gradients(loss, w)[0] * v): a Hessian-vector "
             "product by double tf.gradients"),
    messages={"hvp": ("Hessian-vector product by double tf.gradients (graph only); use "
                      "{use}{why}: cg.hvp(f, w, v) takes the loss as a function f of the "
                      "weights and computes the product in every mode (in a graph the same "
                      "gradient of <gradient, v>, in eager code forward-over-reverse)")},
    docs=DOCS, visits="gradients", check=check, why_not=WHY_NOT)
