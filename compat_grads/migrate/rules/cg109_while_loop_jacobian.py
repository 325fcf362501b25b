"""CG109: the gradient of one row per `tf.while_loop` iteration (inline, or through a map
helper of the module built on `tf.while_loop`), a hand-built Jacobian; rewritten to
`cg.migrate.row_while_loop` when the loop has the form it checks at run time."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import scopes
from compat_grads.migrate.context import (
                                          Context,
                                          dependent_names,
                                          names_in,
                                          refers,
                                          single_expression,
)
from compat_grads.migrate.findings import Edit, Finding, Rule

DOCS = """\
.. code-block:: python

   _, rows = tf.while_loop(lambda i, _: i < m,
                           lambda i, acc: (i + 1, acc.write(i, tf.gradients(y[i], x)[0])),
                           [0, tf.TensorArray(tf.float32, size=m)])
   J = rows.stack()

   def jacobian(fx, x):   # through a map helper of your own built on tf.while_loop
       return loop_map(lambda fxi: tf.gradients(fxi, x)[0], tf.reshape(fx, [-1]))

One gradient row per loop iteration, one after another: use ``cg.stacked_jacobian(y, x)``,
which vectorizes the rows where that is faster and keeps a loop where it is not.
Found when the loop body (a lambda or a ``def``) takes the gradient (``tf.gradients`` or
``tape.gradient``) of a row it selects with the loop index (``y[i]``, ``tf.gather``,
``tf.slice``), whatever it collects the rows in (a ``TensorArray``, ``tf.concat``); or when
a function of the same module that runs a ``tf.while_loop`` (itself or through another
one) maps a function whose gradient target is the element it is handed. A loop that takes
the same gradient at every step (an optimiser) is not a Jacobian and is not reported.

When the condition is ``i < n`` (or ``tf.less(i, n)``, ``tf.math.less(i, n)``: the same
``Less`` op) and the body returns ``(i + 1, acc.write(i, row))`` (a
lambda or a ``def``; in the loop itself or in the map helper's loop), ``--fix`` calls
:func:`compat_grads.migrate.row_while_loop` in place of ``tf.while_loop``, with the same
arguments. At run time it checks the rest — the index starts at 0, the accumulator is a
``TensorArray``, the condition is ``index < n``, the body run once on a symbolic index
writes one row there and returns ``index + 1``, and makes nothing random and changes no
state — and then computes every row at once with ``tf.vectorized_map`` over the body's
own ops, unless the static rule, reading the ops and sizes of that one row, finds the
loop faster (a Newton step's Hessian over a large batch runs 3 to 6 times faster in the
loop than vectorized); otherwise (and in eager mode) it runs the ``tf.while_loop``. Loops that
collect rows otherwise (``tf.concat`` onto an accumulator) are reported only, and say so.
"""

_FORM = "`i < n` (or tf.less(i, n)) with a body that returns (i + 1, acc.write(i, row))"
WHY_NOT = {
    "loop": f"the loop is not {_FORM}",
    "helper": "{name} is your own function, and its tf.while_loop is not " + _FORM,
}
HOW = {
    "loop": (", or cg.migrate.row_while_loop in place of tf.while_loop (same arguments; it "
             "computes every row at once when it can check at run time that they are what "
             "the loop writes)"),
    "helper": ("; the fix makes the tf.while_loop of your {name} a cg.migrate.row_while_loop, "
               "which computes every row at once when the mapped function allows it"),
}
_LOOP_KEYWORDS = {"parallel_iterations", "back_prop", "swap_memory", "name"}
_HELPER = ".migrate.row_while_loop"


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG109 at a `tf.while_loop`, or a call of a map helper, whose rows are gradients."""
    if not isinstance(node, ast.Call):
        return []
    if ctx.names.qualname(node) == "tf.while_loop":
        return _while_loop(ctx, node)
    return _map_helper(ctx, node)


def _while_loop(ctx: Context, node: ast.Call) -> list[Finding]:
    args = pt.call_args(node, ("cond", "body", "loop_vars"))
    body = ctx.function(args[1], node) if args else None
    rows = _row_gradients(ctx, body) if body is not None else []
    if not rows:
        return []
    ctx.handled |= {id(g) for g in rows}
    tapes = [g.func.value.id for g in rows if ctx.is_tape_call(g)]
    kind = f"{tapes[0]}.gradient" if tapes else "tf.gradients"
    edits = _while_edits(ctx, node)
    how = HOW["loop"] if edits else f" (not rewritten: {WHY_NOT['loop']})"
    return [ctx.finding(node, RULE.code, RULE.message("loop", kind=kind, how=how), edits)]


def _map_helper(ctx: Context, node: ast.Call) -> list[Finding]:
    """`helper(lambda e: tf.gradients(e, x)[0], elems)` where `helper` is a function of
    this module built on tf.while_loop: a Jacobian through a hand-written map."""
    helper = ctx.function(node.func, node) if isinstance(node.func, ast.Name) else None
    if helper is None or isinstance(helper, ast.Lambda) or not _loops(ctx, helper):
        return []
    mapped = [ctx.function(a, node) for a in node.args[:1]]
    rows = (_row_gradients(ctx, mapped[0], indexed=False)
            if mapped and mapped[0] is not None else [])
    if not rows:
        return []
    ctx.handled |= {id(g) for g in rows}
    loops = _while_loops(ctx, helper, set())
    here = len(loops) == 1 and ctx.scope(loops[0]) is not None  # not another cell's
    edits = _while_edits(ctx, loops[0]) if here else ()
    name = node.func.id
    how = (HOW["helper"].format(name=name) if edits
           else f" (not rewritten: {WHY_NOT['helper'].format(name=name)})")
    return [ctx.finding(node, RULE.code, RULE.message("helper", name=name, how=how), edits)]


def _while_edits(ctx: Context, node: ast.Call) -> tuple[Edit, ...]:
    """`tf.while_loop(lambda i, _: i < n, body, loop_vars)` with a body returning
    `(i + 1, acc.write(i, ...))`: `cg.migrate.row_while_loop(...)`, same arguments, which
    checks the rest at run time."""
    args = pt.call_args(node, ("cond", "body", "loop_vars"))
    extra = {k.arg for k in node.keywords} - {"cond", "body", "loop_vars"}
    if ctx.writer is None or not args or None in args or len(node.args) > 3 or (
            extra - _LOOP_KEYWORDS):
        return ()
    cond, body = ctx.function(args[0], node), ctx.function(args[1], node)
    count = _bound(ctx, cond, node) if cond is not None else None
    if count is None or body is None or not _writes_rows(body):
        return ()
    return (ctx.replace(node.func, ctx.writer.cg + _HELPER),)


def _bound(ctx: Context, cond: ast.Lambda | ast.FunctionDef, at: ast.AST) -> ast.expr | None:
    """`n` of a condition `i < n` or `tf.less(i, n)` (`i` its first parameter, `n` pure
    and free of its parameters, in the scope of the loop): row_while_loop checks at run
    time that the condition is a `Less` op of the index, which both build."""
    operands = _less_operands(single_expression(cond), ctx.names)
    params = {a.arg for a in cond.args.args}
    if operands is None or not cond.args.args or not ctx.same_scope(at, cond):
        return None
    index, bound = operands
    if not (isinstance(index, ast.Name) and index.id == cond.args.args[0].arg):
        return None
    pure = pt.is_pure(bound, ctx.names) or pt.is_pure_count(bound, ctx.names)
    return bound if pure and not names_in(bound) & params else None


def _while_loops(ctx: Context, fn: ast.FunctionDef, seen: set[int]) -> list[ast.Call]:
    """The tf.while_loop calls `fn` makes, itself or through functions of this module."""
    seen.add(id(fn))
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    found = [n for n in calls if ctx.names.qualname(n) == "tf.while_loop"]
    for call in calls:
        called = ctx.function(call.func, call) if isinstance(call.func, ast.Name) else None
        if isinstance(called, ast.FunctionDef) and id(called) not in seen:
            found += _while_loops(ctx, called, seen)
    return found


def _loops(ctx: Context, fn: ast.FunctionDef) -> bool:
    """Whether `fn` runs a tf.while_loop, itself or through functions of this module
    (each function looked at once; a cycle of calls counts as no loop)."""
    known = ctx.memo("loop functions", dict)
    if id(fn) not in known:
        known[id(fn)] = False  # while it is being looked at
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
        known[id(fn)] = any(ctx.names.qualname(n) == "tf.while_loop" for n in calls) or any(
            isinstance(f, ast.FunctionDef) and _loops(ctx, f)
            for f in (ctx.function(n.func, n) for n in calls if isinstance(n.func, ast.Name)))
    return known[id(fn)]


def _row_gradients(ctx: Context, fn: ast.Lambda | ast.FunctionDef,
                   indexed: bool = True) -> list[ast.Call]:
    """The gradient calls in `fn` whose target is one row: selected by one of its
    parameters (`y[i]`, `tf.gather(y, i)`, `tf.slice(y, [i], ...)`: a loop index), or,
    with `indexed` False, a parameter itself (the element a map hands over)."""
    params = scopes.references(fn, {a.arg for a in fn.args.args})
    rows = {id(n) for n in ast.walk(fn) if ctx.selects(n, params)} if indexed else set()
    names = dependent_names(fn, params if not indexed else set(), rows)
    found = []
    for n in ast.walk(fn):
        if ctx.is_gradients(n) or (isinstance(n, ast.Call)
                                   and ctx.is_tape_call(n, ("gradient",))):
            target = pt.call_args(n, ("target", "sources"))
            target = target[0] if target else None
            if target is not None and refers(target, names | rows):
                found.append(n)
    return found


def _less_operands(test: ast.expr | None, names) -> tuple[ast.expr, ast.expr] | None:
    """(a, b) of `a < b`, `tf.less(a, b)` or `tf.math.less(a, b)`."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Lt):
        return test.left, test.comparators[0]
    ok = (isinstance(test, ast.Call) and names.qualname(test) in ("tf.less", "tf.math.less")
          and len(test.args) == 2 and not test.keywords)
    return (test.args[0], test.args[1]) if ok else None


def _writes_rows(fn: ast.Lambda | ast.FunctionDef) -> bool:
    """Whether `fn(i, acc)` returns `(i + 1, acc.write(i, ...))` (its only return)."""
    if isinstance(fn, ast.Lambda):
        value = fn.body
    else:
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
        value = returns[0].value if len(returns) == 1 and fn.body[-1] is returns[0] else None
    params = [a.arg for a in fn.args.args]
    if len(params) != 2 or fn.args.vararg or not (
            isinstance(value, ast.Tuple | ast.List) and len(value.elts) == 2):
        return False
    step, write = value.elts
    index, acc = params
    return (isinstance(step, ast.BinOp) and isinstance(step.op, ast.Add)
            and isinstance(step.left, ast.Name) and step.left.id == index
            and isinstance(step.right, ast.Constant) and step.right.value == 1
            and isinstance(write, ast.Call) and isinstance(write.func, ast.Attribute)
            and write.func.attr == "write" and isinstance(write.func.value, ast.Name)
            and write.func.value.id == acc and len(write.args) == 2
            and isinstance(write.args[0], ast.Name) and write.args[0].id == index)


RULE = Rule(
    code="CG109", name="while-loop-jacobian", fix="rewrite to a runtime-checked loop",
    summary=("tf.gradients / tape.gradient of one row per tf.while_loop iteration (inline, or "
             "through your own while_loop map helper): a hand-built Jacobian"),
    messages={"loop": ("hand-built Jacobian: {kind} of one row per tf.while_loop iteration, "
                       "one after another; use cg.stacked_jacobian(y, x){how}"),
              "helper": ("hand-built Jacobian: {name} maps a tf.gradients row over the "
                         "elements in a tf.while_loop, one after another; use "
                         "cg.stacked_jacobian(y, x){how}")},
    docs=DOCS, visits="rows", check=check, why_not=WHY_NOT)
