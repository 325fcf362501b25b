"""CG101: `tf.gradients(y[i], x)` in a for loop or a list comprehension, a hand-built
Jacobian; rewritten when the loop only collects the rows (and stacks them right after)."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rowloops, scopes
from compat_grads.migrate.context import SCOPES, Context, axis_zero, names_in
from compat_grads.migrate.findings import Edit, Finding, Rule
from compat_grads.migrate.rowtext import helper_text, row_advice, rows_text, suggest

DOCS = """\
``tf.gradients(y[i], x)`` (or ``y[:, i]``, ``tf.gather(y, i)``, or ``yi`` over
``tf.unstack(y)``) in a ``for`` loop or a list comprehension. The loop may run over
``enumerate(...)`` and over a name bound to ``tf.unstack(...)``, as TensorFlow 1.0's own
``hessians`` did:

.. code-block:: python

   g = tf.gradients(y, x)[0]
   elements = tf.unstack(g)
   H = tf.stack([tf.gradients(gi, x)[0] for gi in elements])
   # --fix:
   H = cg.stacked_jacobian(tf.reduce_sum(g, axis=tf.range(1, tf.rank(g))), x)

That is rewritten as the inline ``tf.unstack`` only when the scope binds the name once, in
a statement of the loop's block before it, and nothing in between binds it or a name of the
unstacked expression again (``g = tf.unstack(g)`` is reported only), and under
``enumerate`` only when the index is used nowhere else. The unstacked expression may be
``tf.gradients(y, x)[k]`` of plain operands (the rewrite builds it again for ``tf.rank``).

.. code-block:: python

   rows = []
   for i in range(n):
       rows.append(tf.gradients(y[i], x)[0])
   J = tf.stack(rows)
   # --fix:
   J = cg.stacked_jacobian(tf.reduce_sum(y[:n], axis=tf.range(1, tf.rank(y[:n]))), x)

Rewritten to one Jacobian when the list is created empty right before the loop, the body
only appends the gradient (through at most one temporary, optionally ``tf.expand_dims(g, 0)``,
which becomes ``tf.expand_dims(J, axis=1)``), the ``tf.stack`` (axis 0) follows right after
the loop, and neither the list nor the loop variable is used elsewhere. Rows flattened
first, ``tf.reshape(g, [-1])`` (the DeepFool of tensorflow-adversarial), get
``cg.migrate.gradient_rows(..., flat=True)``, the stacked Jacobian reshaped to
``[rows, -1]``:

.. code-block:: python

   gs = [tf.reshape(tf.gradients(y[i], xadv)[0], [-1]) for i in range(ydim)]
   g = tf.stack(gs, axis=0)
   # --fix:
   g = cg.migrate.gradient_rows(y, xadv, range(ydim), flat=True)

Other loops (side effects, nested loops, filters, each row passed through another op such
as ``tf.reshape(g, [1, -1])``, flattened rows kept as a list) are reported only, and say
why.

Where the source alone cannot prove the Jacobian equal (the target is a function
parameter or a model's output, which may be a list at run time; a tuple-returning op; a
count with side effects; an ``xrange`` / ``six.moves.range`` shim; a ``tf.reshape`` or
``tf.transpose`` around the stack; a comprehension assigned on one line and stacked on the
next), ``--fix`` rewrites to the runtime-checked helper
:func:`compat_grads.migrate.gradient_rows`, which has the loop's exact semantics:

.. code-block:: python

   grads = []
   for k in xrange(classes):
       grads.append(tf.gradients(logits[:, k], inputs)[0])
   J = tf.reshape(tf.stack(grads), [classes, -1])
   # --fix:
   J = tf.reshape(cg.migrate.gradient_rows(logits, inputs, xrange(classes), axis=1),
                  [classes, -1])

It computes one Jacobian when the values allow it at run time (one float tensor of known
rank, in a graph or ``tf.function``) and the Jacobian is the faster code, and runs the
loop itself otherwise: vectorized rows are not always faster (few rows through a
convolutional net, or rows with large intermediates, run faster one by one; see
:ref:`when compat_grads vectorizes <vectorize-rule>`). The target and
the sources must be plain expressions (names, attributes, indexing): a target computed
anew for every row is reported only. For a loop over
columns ``y[:, i]`` the advice is ``cg.stacked_jacobian(tf.reduce_sum(y, axis=0), x)``:
``tf.gradients`` sums each column over its rows.

Rows kept as a Python list (returned, indexed, cached) get
:func:`compat_grads.migrate.gradient_row_list`, which returns that very list, each row
computed on its own as the loop did (code fetches such rows one at a time, and
fetching one class row then runs that row's pass alone; with ``cached=``, the rows
already there are kept): the rewrite shortens the code and never changes what runs.
Rows used together are faster stacked (``gradient_rows``). A cache of class gradients
filled on demand gets :func:`compat_grads.migrate.fill_gradient_rows`, which fills the
same entries in the same order:

.. code-block:: python

   list_derivatives = []
   for class_ind in xrange(nb_classes):
       (derivatives,) = tf.gradients(predictions[:, class_ind], x)
       list_derivatives.append(derivatives)
   # --fix:
   list_derivatives = cg.migrate.gradient_row_list(
       predictions, x, xrange(nb_classes), axis=1, index=None)

   self._class_grads = [tf.gradients(self._probs[:, i], self._input_ph)[0]
                        if self._class_grads[i] is None else self._class_grads[i]
                        for i in range(self._nb_classes)]
   # --fix:
   self._class_grads = cg.migrate.gradient_row_list(
       self._probs, self._input_ph, range(self._nb_classes), axis=1,
       cached=self._class_grads)

   for label in np.unique(labels):
       if self._class_grads[label] is None:
           self._class_grads[label] = tf.gradients(self._probs[:, label], self._input_ph)[0]
   # --fix:
   cg.migrate.fill_gradient_rows(self._class_grads, self._probs, self._input_ph,
                                 np.unique(labels), axis=1)
"""

WHY_NOT = {
    "arguments": "tf.gradients has arguments that change its values (grad_ys, ...)",
    "row": "the row is not y[i], y[:, i], tf.gather(y, i) or an element of tf.unstack(y)",
    "impure": "y or x is computed anew for every row",
    "wrapper": ("each row goes through {wrapper} before it is collected; only the "
                "gradient itself, tf.expand_dims(row, 0), or tf.reshape(row, [-1]) in rows "
                "stacked right away, is rewritten"),
    "comprehension": ("the rows are not stacked along axis 0 right away (a tf.stack of the "
                      "list, or a list assigned and stacked on the next line)"),
    "loop": ("the loop does more than collect the rows and stack them right after "
             "(other statements, other uses of the list or the index)"),
}


def check(ctx: Context, call: ast.Call) -> list[Finding]:
    """CG101 at a `tf.gradients` call in a row loop."""
    loop = ctx.enclosing_loop(call)
    if loop is None:
        return []
    edits = (_loop_edits(ctx, loop) if isinstance(loop, ast.For)
             else _comprehension_edits(ctx, loop))
    what = "for loop" if isinstance(loop, ast.For) else "list comprehension"
    unit, advice = row_advice([call])
    why = "" if edits else why_not(ctx, call, loop)
    return [ctx.finding(call, RULE.code, RULE.message(
        "loop", unit=unit, what=what, use=suggest(edits, advice), why=why), edits)]


def why_not(ctx: Context, call: ast.Call, loop: ast.For | ast.comprehension) -> str:
    """` (not rewritten: ...)`: why a row loop was left as it is, in a few words."""
    parts, shape = pt.grad_parts(call), ctx.loop_of(loop)
    array = rowloops.array_of(parts[0], shape.var, ctx.names) if parts and shape else None
    wrapper = rowloops.wrapper(call, ctx.parents, ctx.names)
    if parts is None or not parts[2]:
        reason = WHY_NOT["arguments"]
    elif shape is None or not ctx.visits(parts[0], loop):
        reason = WHY_NOT["row"]
    elif shape.why:
        reason = shape.why
    elif not all(pt.is_pure(n, ctx.names) for n in (array, parts[1]) if n is not None):
        reason = WHY_NOT["impure"]
    elif wrapper is not None:
        reason = WHY_NOT["wrapper"].format(wrapper=wrapper)
    elif isinstance(loop, ast.comprehension):
        reason = WHY_NOT["comprehension"]
    else:
        reason = WHY_NOT["loop"]
    return f" (not rewritten: {reason})"


# -- `L = []; for ...: L.append(g)`, or a cache filled in a loop ---------------------------

def _loop_edits(ctx: Context, loop: ast.For) -> tuple[Edit, ...]:
    shape = ctx.loop_of(loop)
    if ctx.writer is None or loop.orelse or shape.why or leaks(ctx, loop):
        return ()
    return _fill_edits(ctx, loop) or _list_edits(ctx, loop)


def _list_edits(ctx: Context, loop: ast.For) -> tuple[Edit, ...]:
    """`L = []; for i in it: L.append(g_i)`: then `J = tf.stack(L)` becomes one Jacobian
    (or `gradient_rows`); a list used otherwise becomes `gradient_row_list`."""
    block = ctx.block_of(loop)
    at = next((i for i, s in enumerate(block) if s is loop), None)
    if at is None or at == 0:
        return ()
    init = block[at - 1]
    listed = _list_init(init)
    element = _appended(ctx, loop, listed) if listed else None
    if element is None:
        return ()
    var, iterable = ctx.loop_of(loop).var, ctx.loop_of(loop).iterable
    stacked = _stacked_name(ctx, block[at + 1]) if at + 1 < len(block) else None
    if stacked is not None and pt.call_args(stacked, ("values",))[0].id == listed and (
            ctx.only_uses(listed, 3, loop)):
        text = rows_text(ctx, element, var, iterable)
        return (ctx.delete(init), ctx.delete(loop), ctx.replace(stacked, text)) if text else ()
    inside = [n for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == listed]
    text = helper_text(ctx, element, var, iterable, "gradient_row_list")
    if len(inside) != 1 or text is None:
        return ()
    return ctx.replace(init.value, text), ctx.delete(loop)


def _fill_edits(ctx: Context, loop: ast.For) -> tuple[Edit, ...]:
    """`for i in it: if C[i] is None: C[i] = g_i` (a cache of rows filled on demand)."""
    body, shape = loop.body, ctx.loop_of(loop)
    var = shape.var
    test = body[0] if len(body) == 1 and isinstance(body[0], ast.If) else None
    if test is None or test.orelse or len(test.body) != 1:
        return ()
    cache, assign = _none_entry(test.test, var), test.body[0]
    if cache is None or not (isinstance(assign, ast.Assign) and len(assign.targets) == 1):
        return ()
    if ast.dump(_entry_of(assign.targets[0], var) or ast.Pass()) != ast.dump(cache):
        return ()
    text = helper_text(ctx, assign.value, var, shape.iterable, "fill_gradient_rows",
                       cache=cache)
    return (ctx.replace(loop, text),) if text else ()


def _appended(ctx: Context, loop: ast.For, listed: str) -> ast.expr | None:
    """The appended gradient expression, through at most one temporary variable."""
    body, var = loop.body, ctx.loop_of(loop).var
    append = _append_arg(body[-1], listed)
    if append is None or len(body) > 2:
        return None
    if len(body) == 1:
        return append
    temp = body[0]
    target = temp.targets[0] if isinstance(temp, ast.Assign) and len(
        temp.targets) == 1 else None
    unpacked = isinstance(target, ast.Tuple | ast.List) and len(target.elts) == 1
    if unpacked:  # `(g,) = tf.gradients(...)`
        target = target.elts[0]
    if not isinstance(target, ast.Name):
        return None
    name = target.id
    used = [n for n in ast.walk(append) if isinstance(n, ast.Name) and n.id == name]
    if name == var or len(used) != 1 or not ctx.only_uses(name, 2, loop):
        return None
    if unpacked:  # marked by the index None: see `rowtext._row_grad`
        value = ast.Subscript(value=temp.value, slice=ast.Constant(None), ctx=ast.Load())
        return value if isinstance(append, ast.Name) else None
    return _inline(append, name, temp.value)


def leaks(ctx: Context, loop: ast.For) -> bool:
    """Whether the loop variable is read after the loop (where it holds the last index)."""
    var, inside = ctx.loop_of(loop).var, {id(n) for n in ast.walk(loop)}
    uses = scopes.references(ctx.scope(loop), {var})
    reads = [n for n in ast.walk(ctx.scope(loop)) if id(n) in uses
             and isinstance(n.ctx, ast.Load) and id(n) not in inside]
    return any(_binder(ctx, n, var) is None for n in reads)


def _binder(ctx: Context, node: ast.AST, var: str) -> ast.AST | None:
    """The loop or comprehension around `node` that binds `var`, or None."""
    while not isinstance(node, SCOPES):
        node = ctx.parents.get(id(node))
        loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
        if any(var in names_in(g.target) for g in loops):  # `k, v in enumerate(...)` too
            return node
    return None


# -- `L = [g for i in ...]` then `tf.stack(L)` on the next statement ----------------------

def _comprehension_edits(ctx: Context, gen: ast.comprehension) -> tuple[Edit, ...]:
    comp = ctx.parents.get(id(gen))
    if not (isinstance(comp, ast.ListComp) and len(comp.generators) == 1 and not gen.ifs
            and not gen.is_async and not ctx.loop_of(gen).why):
        return ()
    return _stacked_comprehension(ctx, comp) or _listed_comprehension(ctx, comp)


def _stacked_comprehension(ctx: Context, comp: ast.ListComp) -> tuple[Edit, ...]:
    """`L = [g for i in ...]` then `tf.stack(L)` on the next statement."""
    gen, assign = comp.generators[0], ctx.parents.get(id(comp))
    if not (isinstance(assign, ast.Assign) and assign.value is comp
            and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
        return ()
    block, listed = ctx.block_of(assign), assign.targets[0].id
    at = next((i for i, s in enumerate(block) if s is assign), None)
    if at is None or at + 1 >= len(block) or not ctx.only_uses(listed, 2, assign):
        return ()
    stacked = _stacked_name(ctx, block[at + 1])
    if stacked is None or pt.call_args(stacked, ("values",))[0].id != listed:
        return ()
    shape = ctx.loop_of(gen)
    text = rows_text(ctx, comp.elt, shape.var, shape.iterable)
    return (ctx.delete(assign), ctx.replace(stacked, text)) if text else ()


def _listed_comprehension(ctx: Context, comp: ast.ListComp) -> tuple[Edit, ...]:
    """`[g_i for i in it]` kept as a list, or `[g_i if C[i] is None else C[i] for ...]`
    (a cache of rows): `gradient_row_list`."""
    gen, element, cache = comp.generators[0], comp.elt, None
    var = ctx.loop_of(gen).var
    if isinstance(element, ast.IfExp):
        cache = _none_entry(element.test, var)
        kept = _entry_of(element.orelse, var)
        if cache is None or kept is None or ast.dump(kept) != ast.dump(cache):
            return ()
        element = element.body
    text = helper_text(ctx, element, var, ctx.loop_of(gen).iterable, "gradient_row_list",
                       cached=cache)
    return (ctx.replace(comp, text),) if text else ()


def _stacked_name(ctx: Context, stmt: ast.stmt) -> ast.Call | None:
    """The one `tf.stack(L)` (axis 0, `L` a name) in a plain assignment or a return,
    possibly inside other calls (`tf.reshape(tf.stack(L), ...)`)."""
    plain = isinstance(stmt, ast.Return) or (isinstance(stmt, ast.Assign)
                                             and len(stmt.targets) == 1)
    stacks = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)
              and ctx.names.qualname(n) == "tf.stack"] if plain and stmt.value else []
    if len(stacks) != 1:
        return None
    value = stacks[0]
    args = pt.call_args(value, ("values", "axis"))
    ok = args and isinstance(args[0], ast.Name) and axis_zero(args[1])
    return value if ok and set(k.arg for k in value.keywords) <= {"values", "axis"} else None


def _list_init(stmt: ast.stmt) -> str | None:
    """`L` of `L = []`."""
    ok = (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
          and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.List)
          and not stmt.value.elts)
    return stmt.targets[0].id if ok else None


def _entry_of(node: ast.expr, var: str) -> ast.expr | None:
    """`C` of `C[var]`."""
    ok = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and (
        node.slice.id == var)
    return node.value if ok else None


def _none_entry(test: ast.expr, var: str) -> ast.expr | None:
    """`C` of the test `C[var] is None`."""
    ok = (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
          and isinstance(test.comparators[0], ast.Constant)
          and test.comparators[0].value is None)
    return _entry_of(test.left, var) if ok else None


def _append_arg(stmt: ast.stmt, listed: str) -> ast.expr | None:
    """`v` of `L.append(v)`."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    ok = (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
          and call.func.attr == "append" and isinstance(call.func.value, ast.Name)
          and call.func.value.id == listed and len(call.args) == 1 and not call.keywords)
    return call.args[0] if ok else None


def _inline(append: ast.expr, name: str, value: ast.expr) -> ast.expr | None:
    """`append` with the temporary `name` replaced by its value: `t`, `t[k]` or
    `f(t, ...)`."""
    if isinstance(append, ast.Name) and append.id == name:
        return value
    if isinstance(append, ast.Subscript) and isinstance(append.value, ast.Name) and (
            append.value.id == name):  # `grads = tf.gradients(...)` then `append(grads[0])`
        return ast.Subscript(value=value, slice=append.slice, ctx=ast.Load())
    first = append.args[0] if isinstance(append, ast.Call) and append.args else None
    if isinstance(first, ast.Name) and first.id == name:
        return ast.Call(func=append.func, args=[value, *append.args[1:]],
                        keywords=append.keywords)
    return None


RULE = Rule(
    code="CG101", name="jacobian-loop", fix="rewrite for the canonical loop",
    summary="tf.gradients(y[i], x) in a for loop or list comprehension: a hand-built Jacobian",
    messages={"loop": "hand-built Jacobian: one tf.gradients graph per {unit} in a {what}; "
                      "use {use}{why}"},
    docs=DOCS, visits="gradients", check=check, why_not=WHY_NOT)
