"""CG106: `tf.gradients` of `tf.gradients` with respect to its `grad_ys`, the forward-mode
trick; with tangents of ones it is exactly `cg.per_element_gradients(U, x)`."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import scopes
from compat_grads.migrate.context import Context, is_zero, names_in
from compat_grads.migrate.findings import Edit, Finding, Rule

DOCS = """\
.. code-block:: python

   u = tf.ones_like(y)
   g = tf.gradients(y, x, grad_ys=u)
   jvp = tf.gradients(g, u, grad_ys=v)

Use ``cg.jvp(f, x, v)`` (a callable ``f``), or ``cg.per_element_gradients(y, x)`` when ``v``
is all ones. The operands may be names, attributes (``grad_ys=self.dummy`` then
``tf.gradients(g, self.dummy)``, as physics-informed networks write it) or subscripts;
both calls must be in the same function, so an ordinary ``tf.gradients(loss, v)``
elsewhere is not taken for the trick.

Without ``grad_ys`` on the second call the tangents are ones, and the form is exactly
``cg.per_element_gradients(U, x)`` (dy/dx with U's shape): ``g`` is linear in the dummy,
so its gradient with respect to the dummy is J·1 whatever the dummy holds.

.. code-block:: python

   dummy = tf.ones_like(U)
   g = tf.gradients(U, x, grad_ys=dummy)[0]
   U_x = tf.gradients(g, dummy)[0]
   # --fix:
   U_x = cg.per_element_gradients(U, x)

``--fix`` rewrites it when the source proves it, and deletes ``g`` and the dummy when
nothing else uses them (and they are statements of the same block):

- the second call is ``tf.gradients(g, dummy)[0]``, with no ``grad_ys`` (explicit ones are
  not recognised) and no other argument that changes its values;
- ``g`` is bound once in the scope, to ``tf.gradients(U, x, grad_ys=dummy)[0]``, with one
  target ``U`` and one source ``x`` (not lists); a source that is not provably one tensor
  becomes ``tf.nest.flatten(x)[0]``, what ``[0]`` picks;
- the dummy is a name bound once in the scope to ``tf.ones_like(U)``, ``tf.zeros_like(U)``,
  or ``tf.ones`` / ``tf.zeros`` / ``tf.fill`` of ``tf.shape(U)``, and used only in the two
  calls (so neither ``U`` nor ``x`` can depend on it). Its values do not matter, its shape
  does: a placeholder (or an attribute, or a parameter) may have another shape that
  broadcasts against ``U``'s, and then the original gives a dummy-shaped result;
- ``U`` and ``x`` are plain expressions (names, attributes, indexing) of names bound at
  most once in the scope, since the rewrite evaluates them where the second call is.

Anything else is reported only, and the finding says which condition fails. The plain
``tf.gradients(u, x)`` of a physics-informed network whose ``u`` has one value per
collocation point is already exact and one reverse pass: it is not reported.
"""

WHY_NOT = {
    "index": "the result is not taken with [0]",
    "gradient": ("the differentiated gradient is not g = tf.gradients(U, x, "
                 "grad_ys=dummy)[0], bound once in this scope"),
    "lists": "U or x is a list of several targets or sources",
    "operands": ("U or x is not a plain expression of names bound once in this scope (the "
                 "rewrite evaluates them where the second tf.gradients is)"),
    "dummy": ("the dummy is not a name bound once in this scope to tf.ones_like(U), "
              "tf.zeros_like(U), or tf.ones / tf.zeros / tf.fill of tf.shape(U); any "
              "other dummy, a placeholder say, may have another, broadcastable shape, "
              "which gives another result"),
    "used": "the dummy is used elsewhere too (U or x could depend on it)",
}
_TRICK = "forward-mode trick (tf.gradients with respect to grad_ys): "


def check(ctx: Context, call: ast.Call) -> list[Finding]:
    """CG106 at `tf.gradients(g, dummy)`, `dummy` the grad_ys of a gradient in this scope
    (outside a row loop: that is CG101's)."""
    parts = pt.grad_parts(call)
    if not parts or ctx.enclosing_loop(call) is not None:
        return []
    if _scoped_key(ctx, call, parts[1]) not in ctx.memo("grad_ys", lambda: _grad_ys_keys(ctx)):
        return []
    if not parts[2]:
        return [ctx.finding(call, RULE.code, RULE.message("jvp", trick=_TRICK))]
    edits, why = _per_element_edits(ctx, call)
    use = edits[0].text if edits else f"cg.per_element_gradients(U, x) (not rewritten: {why})"
    return [ctx.finding(call, RULE.code, RULE.message("ones", trick=_TRICK, use=use), edits)]


def _grad_ys_keys(ctx: Context) -> set[tuple[int, str]]:
    """(scope, expression) of every `grad_ys=` operand (a name, an attribute such as
    `self.dummy`, or a subscript) of a tf.gradients call: the forward-mode trick then
    differentiates with respect to the same expression in the same function."""
    keys = set()
    for node in ctx.nodes:
        if ctx.is_gradients(node):
            args = pt.call_args(node, ("ys", "xs", "grad_ys"))
            if args and args[2] is not None:
                keys.add(_scoped_key(ctx, node, args[2]))
    return keys - {None}


def _scoped_key(ctx: Context, at: ast.AST, operand: ast.expr) -> tuple[int, str] | None:
    if not isinstance(operand, ast.Name | ast.Attribute | ast.Subscript):
        return None
    return id(ctx.scope(at)), ast.dump(operand)


def _per_element_edits(ctx: Context, call: ast.Call) -> tuple[tuple[Edit, ...], str]:
    """`tf.gradients(g, dummy)[0]` -> `cg.per_element_gradients(U, x)` where this scope
    binds `g = tf.gradients(U, x, grad_ys=dummy)[0]` once and `dummy` once, to a fresh
    tensor of U's shape used nowhere else; else ((), why not)."""
    scope, (g, dummy, _) = ctx.scope(call), pt.grad_parts(call)
    outer = ctx.parents.get(id(call))
    if not (isinstance(outer, ast.Subscript) and is_zero(outer.slice)):
        return (), WHY_NOT["index"]
    first = scopes.assigned_value(scope, g.id) if isinstance(g, ast.Name) else None
    grad = _vjp_of(ctx, first, dummy)
    if grad is None or ctx.writer is None:
        return (), WHY_NOT["gradient"]
    why = _operands_why_not(ctx, scope, grad) or _dummy_why_not(ctx, scope, grad, dummy)
    if why:
        return (), why
    w = ctx.writer
    text = w.call("per_element_gradients", w.text(grad.ys), w.source_of(grad))
    return (ctx.replace(outer, text), *_spent(ctx, scope, outer, g.id, dummy.id)), ""


def _spent(ctx: Context, scope: ast.AST, at: ast.AST, g: str, dummy: str) -> tuple[Edit, ...]:
    """Deletions of `g = ...` and `dummy = ...`, which the rewrite at `at` leaves unused,
    when they are statements of its block (deleting them leaves no block empty)."""
    assigns = [s for s in ctx.block_of(ctx.statement_of(at)) if isinstance(s, ast.Assign)
               and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
               and s.targets[0].id in (g, dummy)]
    if len(assigns) != 2 or len(scopes.references(scope, {g})) != 2:
        return ()
    return tuple(ctx.delete(s) for s in assigns)


def _vjp_of(ctx: Context, value: ast.expr | None, dummy: ast.expr) -> pt.Grad | None:
    """`tf.gradients(U, x, grad_ys=dummy)[0]` (no other argument that changes values)."""
    grad = pt.indexed_grad(value, ctx.names) if value is not None else None
    args = pt.call_args(grad.call, ("ys", "xs", "grad_ys")) if grad else None
    extra = {k.arg for k in grad.call.keywords} - {"ys", "xs", "grad_ys"} if grad else set()
    if not args or grad.index != 0 or len(grad.call.args) > 3 or extra - pt.NEUTRAL_KWARGS:
        return None
    return grad if ast.dump(args[2]) == ast.dump(dummy) else None


def _operands_why_not(ctx: Context, scope: ast.AST, grad: pt.Grad) -> str:
    """Why U and x may not be evaluated again where the second call is ("" if they may)."""
    if any(isinstance(n, ast.List | ast.Tuple) for n in (grad.ys, grad.xs)):
        return WHY_NOT["lists"]
    counts = scopes.bindings(scope)
    once = all(counts[n] <= 1 for n in names_in(grad.ys) | names_in(grad.xs))
    if not (once and pt.is_pure(grad.ys, ctx.names) and pt.is_pure(grad.xs, ctx.names)):
        return WHY_NOT["operands"]
    return ""


def _dummy_why_not(ctx: Context, scope: ast.AST, grad: pt.Grad, dummy: ast.expr) -> str:
    """Why the dummy may matter to the result ("" if it provably does not)."""
    named = isinstance(dummy, ast.Name)
    value = scopes.assigned_value(scope, dummy.id) if named else None
    if value is None or not pt.shaped_like(value, grad.ys, ctx.names):
        return WHY_NOT["dummy"]
    if len(scopes.references(scope, {dummy.id})) != 3:
        return WHY_NOT["used"]
    return ""


RULE = Rule(
    code="CG106", name="double-gradients-jvp", fix="rewrite for tangents of ones",
    summary="tf.gradients of tf.gradients with respect to grad_ys: the forward-mode trick",
    messages={
        "jvp": ("{trick}a Jacobian-vector product J·v; use cg.jvp(f, x, v), or "
                "cg.per_element_gradients(U, x) when v is all ones (not rewritten: the second "
                "tf.gradients has grad_ys or other arguments that change its values)"),
        "ones": ("{trick}with no grad_ys on the second tf.gradients this is exactly "
                 "cg.per_element_gradients(U, x) (dy/dx with U's shape); use {use}"),
    },
    docs=DOCS, visits="gradients", check=check, why_not=WHY_NOT)
