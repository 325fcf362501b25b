"""CG103: `tf.map_fn` whose function calls `tf.gradients`: over the values of `y` it fails
at run time, over `tf.range(n)` (or its own element) it runs one gradient after another."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import scopes
from compat_grads.migrate.context import (
                                          Context,
                                          dependent_names,
                                          expand_dims_zero,
                                          names_in,
                                          reduce_sum_of,
                                          refers,
                                          single_expression,
)
from compat_grads.migrate.findings import Edit, Finding, Rule
from compat_grads.migrate.rowtext import jacobian_text, suggest
from compat_grads.migrate.rules.cg111_laplacian_loop import owned

DOCS = """\
``tf.map_fn`` whose function calls ``tf.gradients``. Over the *values* of ``y`` it fails at
run time (a TensorArray element is read twice); over ``tf.range(n)`` it runs one gradient
per element in a ``while_loop``.

.. code-block:: python

   tf.map_fn(lambda yi: tf.gradients(yi, x)[0], y)
   # --fix:
   cg.stacked_jacobian(tf.reduce_sum(y, axis=tf.range(1, tf.rank(y))), x)

   tf.map_fn(lambda yi: tf.reduce_sum(tf.gradients(yi, x)[0]), y)
   # --fix:
   cg.per_element_gradients(tf.reduce_sum(y, axis=tf.range(1, tf.rank(y))), x)

The function may be a lambda or a ``def`` in the same scope whose body is one ``return``.
``tf.reduce_sum(tf.expand_dims(g, 0))`` is treated as ``tf.reduce_sum(g)`` (same value,
same ``[n]`` result). Report only when ``elems`` is not provably one tensor (a nest maps
a tuple per element).

A map that differentiates with respect to its own element works, one element after
another. ``--fix`` calls :func:`compat_grads.migrate.gradient_map_fn` in place of
``tf.map_fn``, same arguments: every element at once with ``tf.vectorized_map`` when the
values allow it (one float tensor, a result of its dtype, nothing random) and the
static rule finds vectorizing faster (not through convolutions or pooling, not for
large elements), ``map_fn`` otherwise:

.. code-block:: python

   score = tf.map_fn(lambda v: tf.gradients(log_prob(v), v)[0], samples)
   # --fix:
   score = cg.migrate.gradient_map_fn(lambda v: tf.gradients(log_prob(v), v)[0], samples)
"""

PROBLEMS = {
    "indices": "one gradient graph per element in a while_loop (slow)",
    "element": ("one gradient per element, run one after another in a while_loop (it "
                "works, slowly)"),
    "values": "tf.gradients of a mapped value fails at run time (TensorArray read twice)",
}
ADVICE = {
    "element": ("cg.batch_jacobian(f(xs), xs) when each element's result depends on that "
                "element only"),
    "rows": "cg.stacked_jacobian(y, x) or cg.per_element_gradients(y, x)",
    "helper": (", or cg.migrate.gradient_map_fn in place of tf.map_fn (same arguments; it "
               "maps every element at once when it can)"),
}
_HELPER = ".migrate.gradient_map_fn"


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG103 at a `tf.map_fn` whose function takes gradients."""
    if not (isinstance(node, ast.Call) and ctx.names.qualname(node) == "tf.map_fn"):
        return []
    args = pt.call_args(node, ("fn", "elems"))
    fn = ctx.function(args[0]) if args else None
    grads = ctx.gradients_in(fn) if fn else []
    if not grads or all(id(g) in owned(ctx) for g in grads):  # a Laplacian's terms: CG111's
        return []
    ctx.handled |= {id(g) for g in grads}
    over_indices = isinstance(args[1], ast.Call) and ctx.names.qualname(args[1]) == "tf.range"
    wrt_element = not over_indices and _wrt_element(fn, grads)
    edits = _map_fn_edits(ctx, node, fn, args[1], over_indices)
    if not edits and wrt_element and ctx.writer is not None and len(node.args) <= 2:
        edits = (ctx.replace(node.func, ctx.writer.cg + _HELPER),)
    problem = PROBLEMS["indices" if over_indices else "element" if wrt_element else "values"]
    fallback = ADVICE["element" if wrt_element else "rows"]
    shown = edits
    if edits and edits[0].text.endswith(_HELPER):
        fallback, shown = fallback + ADVICE["helper"], ()
    return [ctx.finding(node, RULE.code, RULE.message(
        "map_fn", problem=problem, use=suggest(shown, fallback)), edits)]


def _wrt_element(fn: ast.Lambda | ast.FunctionDef, grads: list[ast.Call]) -> bool:
    """Whether every gradient in the mapped function is with respect to its element, or
    to a name the function computes from it (`xadv = tf.expand_dims(image, 0)`, as the
    per-image DeepFool writes it): the gradient then never reaches the element's read."""
    params = dependent_names(fn, scopes.references(fn, {a.arg for a in fn.args.args}))
    parts = [pt.grad_parts(g) for g in grads]
    return all(p is not None and refers(p[1], params) for p in parts)


def _map_fn_edits(ctx: Context, node: ast.Call, fn: ast.Lambda | ast.FunctionDef,
                  elems: ast.expr, over_indices: bool) -> tuple[Edit, ...]:
    body = single_expression(fn)
    params = [a.arg for a in fn.args.args]
    if ctx.writer is None or body is None or elems is None or len(params) != 1 or (
            not ctx.same_scope(node, fn)):
        return ()
    summed = reduce_sum_of(body, ctx.names)
    if summed is not None:  # the sum of tf.expand_dims(g, 0) is the sum of g
        summed = expand_dims_zero(summed, ctx.names) or summed
    element = summed if summed is not None else body
    function = "stacked_jacobian" if summed is None else "per_element_gradients"
    if over_indices:
        text = jacobian_text(ctx, element, params[0], elems, "tf.range", function)
    else:
        text = _values_text(ctx, element, params[0], elems, function)
    return (ctx.replace(node, text),) if text else ()


def _values_text(ctx: Context, element: ast.expr, param: str, elems: ast.expr,
                 function: str) -> str | None:
    grad = pt.indexed_grad(element, ctx.names)
    if grad is None or not grad.clean or not isinstance(grad.ys, ast.Name):
        return None
    if grad.ys.id != param or param in names_in(grad.xs) or not pt.is_pure(
            elems, ctx.names) or not ctx.names.is_tensor(elems):
        return None  # elems that may be a nest map a tuple per element
    source = ctx.writer.source_of(grad)
    rows = ctx.writer.rows(pt.Rows(elems, 0, None))
    return ctx.writer.call(function, rows, source) if source else None


RULE = Rule(
    code="CG103", name="map-fn-gradients", fix="rewrite for one-expression functions",
    summary=("tf.map_fn whose function calls tf.gradients (over values of y it fails at run "
             "time)"),
    messages={"map_fn": "tf.map_fn with tf.gradients: {problem}; use {use}"},
    docs=DOCS, visits="nodes", check=check)
