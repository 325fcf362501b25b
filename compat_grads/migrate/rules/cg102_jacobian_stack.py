"""CG102: `tf.stack([tf.gradients(y[i], x)[0] for i in ...])`, a hand-built Jacobian."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate.context import Context, axis_zero
from compat_grads.migrate.findings import Edit, Finding, Rule
from compat_grads.migrate.rowtext import row_advice, rows_text, suggest
from compat_grads.migrate.rules.cg101_jacobian_loop import why_not
from compat_grads.migrate.rules.cg111_laplacian_loop import owned

DOCS = """\
.. code-block:: python

   J = tf.stack([tf.gradients(y[i], x)[0] for i in range(n)])
   # --fix:
   J = cg.stacked_jacobian(tf.reduce_sum(y[:n], axis=tf.range(1, tf.rank(y[:n]))), x)

Report only with ``axis`` other than 0, ``grad_ys`` or other value-changing arguments, or
filters in the comprehension. Rows that take element ``i`` of column ``i``'s gradient,
``tf.stack([tf.gradients(y[:, i], x)[0][:, i] for i in range(d)])``, are the diagonal of a
square Jacobian (a divergence's terms): reported only, with ``cg.batch_divergence(y, x)``
as the advice for their sum.

Where the shapes the source writes prove more, the call is shorter (here and in CG101
and CG103): the rows of a vector need no row sums, and the rows of a gradient with
respect to a vector of weights are the Hessian's:

.. code-block:: python

   x = tf.placeholder(tf.float32, [6])
   y = tf.sin(x) * tf.reduce_sum(x ** 2)
   J = tf.stack([tf.gradients(y[i], x)[0] for i in range(4)])
   # --fix:
   J = cg.stacked_jacobian(y[:4], x)

   w = tf.Variable(tf.ones([3]))
   g = tf.gradients(loss, w)[0]
   H = array_ops_stack.stack([tf.gradients(r, w)[0] for r in array_ops_stack.unstack(g)])
   # --fix:
   H = cg.hessian(loss, w)

``cg.hessian`` takes the first ``n`` rows, ``[:n]``, of a loop over ``range(n)`` short of
them, and sums a ``loss`` that is not a ``tf.reduce_sum`` or ``tf.reduce_mean`` over every
axis, as ``tf.gradients`` does. TensorFlow's private spellings of ``tf.stack`` and
``tf.unstack`` (``array_ops_stack.stack`` / ``unstack``, and the pre-1.0
``array_ops.pack`` / ``unpack``) are found as the public ones.
"""


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG102 at a `tf.stack` of a list comprehension of gradient rows."""
    if not (isinstance(node, ast.Call) and ctx.names.qualname(node) == "tf.stack"):
        return []
    args = pt.call_args(node, ("values", "axis"))
    comp = args[0] if args else None
    if not isinstance(comp, ast.ListComp):
        return []
    grads = ctx.gradients_in(comp.elt)
    if not grads or not any(ctx.enclosing_loop(g) in comp.generators for g in grads) or all(
            id(g) in owned(ctx) for g in grads):  # a Laplacian's terms: CG111's
        return []
    ctx.handled |= {id(g) for g in grads}
    if _diagonal_term(ctx, comp):
        return [ctx.finding(node, RULE.code, RULE.message("diagonal"))]
    edits = _stack_edits(ctx, node, comp, args[1])
    unit, advice = row_advice(grads)
    why = "" if edits else why_not(ctx, grads[0], comp.generators[0])
    return [ctx.finding(node, RULE.code, RULE.message(
        "stack", unit=unit, use=suggest(edits, advice), why=why), edits)]


def _diagonal_term(ctx: Context, comp: ast.ListComp) -> bool:
    """Whether each row is `tf.gradients(y[:, i], x)[0][:, i]` (or `[..., i]` both times)
    over `i`: the diagonal of a square Jacobian, a divergence's terms, not its rows."""
    grad = pt.indexed_grad(comp.elt.value, ctx.names) if isinstance(
        comp.elt, ast.Subscript) else None
    target = comp.generators[0].target
    if grad is None or not isinstance(grad.ys, ast.Subscript) or not isinstance(
            target, ast.Name):
        return False
    return all(isinstance(s, ast.Tuple) and len(s.elts) == 2
               and isinstance(s.elts[0], ast.Slice | ast.Constant)
               and isinstance(s.elts[1], ast.Name) and s.elts[1].id == target.id
               for s in (comp.elt.slice, grad.ys.slice))


def _stack_edits(ctx: Context, node: ast.Call, comp: ast.ListComp,
                 axis: ast.expr | None) -> tuple[Edit, ...]:
    extra = {k.arg for k in node.keywords} - {"values", "axis"}
    if ctx.writer is None or extra or not axis_zero(axis) or len(comp.generators) != 1:
        return ()
    gen = comp.generators[0]
    shape = ctx.loop_of(gen)
    if gen.ifs or gen.is_async or shape is None or shape.why:
        return ()
    text = rows_text(ctx, comp.elt, shape.var, shape.iterable)
    return (ctx.replace(node, text),) if text else ()


RULE = Rule(
    code="CG102", name="jacobian-stack", fix="rewrite",
    summary="tf.stack([tf.gradients(y[i], x)[0] for i in ...]): a hand-built Jacobian",
    messages={"stack": "hand-built Jacobian: tf.stack of one tf.gradients graph per {unit}; "
                       "use {use}{why}",
              "diagonal": ("hand-built Jacobian diagonal (a divergence's terms): tf.stack of "
                           "one tf.gradients graph per column y[:, i], each taking element i; "
                           "their sum over i is cg.batch_divergence(y, x) for independent "
                           "samples (strategy=\"reverse\" keeps the loop's values where "
                           "samples interact), one pass for every column (not rewritten: the "
                           "stacked terms themselves are no single call's result)")},
    docs=DOCS, visits="nodes", check=check)
