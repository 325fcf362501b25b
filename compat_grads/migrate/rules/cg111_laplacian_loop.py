"""CG111: the per-dimension Laplacian or Hessian diagonal of TF1 code (PINNs, quantum Monte
Carlo kinetic energies, score matching): `tf.gradients(g[:, i], x)[0][:, i]` with
`g = tf.gradients(u, x)[0]`, summed or stacked over `i` in a loop, a comprehension or a
`tf.map_fn` over `tf.range(d)`: one or two gradient graphs per dimension."""

from __future__ import annotations

import ast
import dataclasses

from compat_grads.migrate import laplacian_facts as facts
from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rebinding, samples, shapes
from compat_grads.migrate.context import Context, reduce_sum_of, single_expression
from compat_grads.migrate.findings import Edit, Finding, Rule
from compat_grads.migrate.rules.cg101_jacobian_loop import leaks

DOCS = """\
One term per dimension ``i`` of ``x``, one gradient graph each (two where ``u_x`` is
taken inside the loop):

.. code-block:: python

   x = tf.placeholder(tf.float32, [None, d])
   w = tf.Variable(tf.ones([d, 16]))
   u = tf.reduce_sum(tf.tanh(tf.matmul(x, w)), axis=1)  # [b], row by row
   u_x = tf.gradients(u, x)[0]
   lap = sum(tf.gradients(u_x[:, i], x)[0][:, i] for i in range(x.shape[1]))
   # --fix:
   lap = cg.batch_laplacian(u, x)

   u = model(x)  # its shape and its rows not proved
   u_x = tf.gradients(u, x)[0]
   lap = sum(tf.gradients(u_x[:, i], x)[0][:, i] for i in range(x.shape[1]))
   # --fix (the loop's own gradient, u_x, reused):
   lap = cg.batch_divergence(u_x, x)
   u_xx = tf.stack([tf.gradients(u_x[:, i], x)[0][:, i] for i in range(d)], axis=1)
   # --fix:
   u_xx = cg.batch_hessian_diagonal(tf.reduce_sum(u, axis=tf.range(1, tf.rank(u))), x,
                                    strategy="reverse")

The message names the call in the code's own tensors (``cg.batch_laplacian(f, x)``), and
says what ``--fix`` writes where that differs.

Found as ``sum(...)`` of a generator or list, ``tf.add_n([...])``,
``tf.reduce_sum(tf.stack([...]), axis=0)``, ``lap = 0`` then ``for i in range(d): lap +=
...`` (terms summed: ``batch_laplacian``), ``tf.stack([...], axis=1)`` (the diagonal:
``batch_hessian_diagonal``), and ``tf.map_fn(lambda i: ..., tf.range(d))`` (the diagonal
with the dimension first: ``tf.transpose`` of it; summed by ``tf.reduce_sum(...,
axis=0)``, also of a name assigned the terms on the line before: the Laplacian), with
``u_x`` inline or a name assigned once; ``u_x[..., i]`` is ``u_x[:, i]`` for a rank-2
``x``, ``tf.expand_dims(u_x[:, i], -1)`` (FermiNet's TF1 kinetic energy) has the same
sum, and in a for loop the second gradient may go through a name first:
``h = tf.gradients(u_x[:, i], x)[0]`` then ``lap += h[:, i]``. A term of another source, or
a mixed partial (``[:, i]`` then ``[:, j]``), is not one of them.

What the loop computes: ``tf.gradients`` differentiates the sum of its target, so term
``i`` at sample ``s`` is ``sum_r d² U / d x[r, i] d x[s, i]`` with ``U = sum(u)``. That is
each sample's own second derivative only when samples are independent. The rewrites
compute exactly this quantity for any ``u``. The sum is the per-sample divergence of that
same gradient, ``sum_r d u_x[s, i] / d x[r, i]``, equal term by term because the Hessian
of ``U`` is symmetric, and :func:`~compat_grads.batch_divergence` takes it in one forward
walk over the gradient's ops (faster than the loop from a few dimensions on: a tanh MLP
2→20→20→1, b = 1000, d = 50 ran in 2.8 ms instead of 4.0, built in 0.12 s instead of 0.62).
The diagonal takes ``strategy="reverse"`` (or any explicit strategy): the products of the
batch-summed gradient with the column directions, as the loop does; summing ``u`` over its
non-batch axes leaves ``U`` unchanged (``u`` of shape ``[b]``, ``[b, 1]`` or ``[b, k]``).
For the Laplacian, ``cg.batch_laplacian(u, x)`` without ``strategy=``
the forward Laplacian gives the same values for independent samples, faster, but other
values when samples interact (batch norm in training mode, attention across the batch);
``independent=False`` gives each sample's own Laplacian then, which the loop never did.
So ``--fix`` writes ``cg.batch_laplacian(u, x)`` (and ``cg.batch_hessian_diagonal(u, x)``
without ``strategy=``) only where the source proves the samples independent and ``u`` one
scalar per sample: ``u`` of shape ``[b]`` or ``[b, 1]`` by the shapes its definitions
write, computed from ``x`` by ops that keep rows apart (elementwise functions, arithmetic
with tensors that do not depend on ``x``, ``tf.matmul`` with such weights,
``tf.layers.dense``, reductions, ``tf.expand_dims`` and ``tf.concat`` along other axes
than the batch); elsewhere it writes the divergence of the loop's gradient and the
diagonal with ``strategy="reverse"`` (of ``u`` summed per sample, where its shape is not
proved). ``tf.map_fn(..., back_prop=False)`` stops the gradients through its result: the
rewrite is wrapped in ``tf.stop_gradient(...)``, which does the same.

``--fix`` rewrites when it can prove the values are the same: ``x`` is of rank 2 (one
definition of it in the module, ``tf.placeholder`` / ``tf.ones`` / ``tf.reshape`` with a
two-entry shape, or a ``tf.concat`` along axis 1 of such); the loop runs over
``range(n)`` (``tf.range(n)`` for ``tf.map_fn``) with ``n`` a plain expression, its
variable not used after the loop; ``u``, ``x`` and ``n`` are plain expressions (names,
attributes, indexing) that mean the same where the rewrite puts them; and ``tf.gradients``
has no arguments that change its values (``tf.map_fn``'s ``back_prop`` is a literal
``True`` or ``False``). With ``u_x`` a name assigned before the loop,
``u`` and ``x`` there must provably be the same tensors at the loop: a name or an
attribute chain (an indexed ``outs[-1]`` may be another entry by then), its one store
before that assignment and in no loop body the Laplacian's loop is not in, the assignment
in no block the loop is not in, no ``setattr`` / ``global`` / ``nonlocal`` rebinding it.
``u`` must be batched along its first axis: a ``tf.reduce_*`` without axis or over axis
0, or a list of targets, is reported only (the rewritten call would raise where the loop
runs). So is a ``lap = 0`` that shares its line with another statement. When ``n`` is not
provably the width of ``x`` (``x.shape[1]`` and its spellings, or the constant or name of
``x``'s shape), the rewrite takes the first ``n`` columns of the diagonal:
``cg.batch_hessian_diagonal(...)[:, :n]``, summed over axis 1 for a Laplacian. Of an ``x``
of provable rank other than 2, ``[:, i]`` is a slab and the terms are no Hessian diagonal:
no CG111 (CG101 reports the loop of gradients). Other forms are reported only.
"""

WHY_NOT = {
    "arguments": "tf.gradients has arguments that change its values (grad_ys, ...)",
    "rank": ("x is not provably of rank 2 (one definition by tf.placeholder, tf.ones, "
             "tf.reshape ... with a two-entry shape, or a tf.concat of such along axis 1)"),
    "count": "the loop does not run over range(n) (tf.range(n) in tf.map_fn) of a plain n",
    "form": ("the terms are not summed (sum, tf.add_n, tf.reduce_sum(tf.stack(...), axis=0), "
             "lap = 0 then lap += ...) or stacked (tf.stack(..., axis=1), tf.map_fn) as "
             "they are made"),
    "impure": "u or x is computed anew for every dimension, or may be rebound before the loop",
    "moved": ("u or x may mean another tensor at the loop than where the first gradient was "
              "taken (an indexed u, a store after that gradient or in another loop, setattr, "
              "a global or nonlocal)"),
    "scalar": ("u is not batched along its first axis (a reduction without axis or over axis "
               "0, or a list of targets): the rewrite needs u's first axis to be the batch"),
    "shared": "a statement deleted by the rewrite shares its line with another statement",
    "index": "the loop variable is used after the loop",
    "map": ("the tf.map_fn has other arguments than dtype / fn_output_signature / name / "
            "parallel_iterations / swap_memory / infer_shape / back_prop=True or False"),
}
ADVICE = {"laplacian": "cg.batch_laplacian({u}, {x})",
          "diagonal": "cg.batch_hessian_diagonal({u}, {x})",
          "rows": "tf.transpose(cg.batch_hessian_diagonal({u}, {x}))"}
DIVERGENCE = (" (the loop's values, for any {u}: batch_laplacian takes {u} of shape [b] or "
              "[b, 1] and gives the loop's values where samples are independent, which the "
              "source does not prove)")
STOPPED = (" (back_prop=False stops the gradients through the tf.map_fn's result: "
           "tf.stop_gradient does that to the call)")
NOTE = ("; tf.gradients differentiates the batch sum of {u}, so where samples interact the "
        "loop mixes them: strategy=\"reverse\" keeps the loop's values, independent=False "
        "gives each sample's own")
# back_prop (True, or False: then the rewrite stops the gradients through its result too).
_MAP_KEYWORDS = frozenset({"dtype", "fn_output_signature", "name", "parallel_iterations",
                           "swap_memory", "infer_shape", "back_prop"})
OWNED = "cg111"  # the memo of the gradient calls CG111 reported: CG102 and CG103 skip them


@dataclasses.dataclass(frozen=True)
class Term:
    """`tf.gradients(G[:, i], x)[0][:, i]`, `G` being `tf.gradients(u, x)[0]` inline or a
    name assigned it once; `clean` False when an argument changes the values; `temp` the
    assignment of the second gradient to a name when `node` is that name's column."""

    node: ast.Subscript
    calls: tuple[ast.Call, ...]
    u: ast.expr
    x: ast.expr
    var: str
    inline: bool
    clean: bool
    temp: ast.stmt | None = None
    gradient: str | None = None  # the name `G` is held in, when not inline


@dataclasses.dataclass(frozen=True)
class Form:
    """Where the terms are collected: `kind` "laplacian", "diagonal" or "rows" (the
    diagonal, dimension first), `node` the expression (or loop) replaced by `prefix` and the
    rewrite, `count` the loop's `n`, `delete` a statement that goes too (`lap = 0`, or
    `rows = tf.map_fn(...)` summed on the next line), `at` where the finding is (else
    `node`), `stopped` for a `tf.map_fn(..., back_prop=False)`."""

    kind: str
    what: str
    node: ast.AST
    count: ast.expr | None
    why: str = ""
    delete: ast.stmt | None = None
    prefix: str = ""
    at: ast.AST | None = None
    stopped: bool = False


def owned(ctx: Context) -> set[int]:
    """The ids of the gradient calls CG111 reported (CG102 and CG103 leave them)."""
    return ctx.memo(OWNED, set)


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG111 at the collection of per-dimension second derivatives."""
    term = term_of(ctx, node) if ctx.is_gradients(node) else None
    if term is None or id(node) in owned(ctx):
        return []
    form = _form(ctx, term)
    if form is None or rebinding.rank_at(ctx, term.x, term.node) not in (None, 2):
        return []  # of a rank-3 x, `[:, i]` is a slab: the terms are no Hessian diagonal
    owned(ctx).update(id(c) for c in term.calls)
    ctx.handled.update(id(c) for c in term.calls)
    why = form.why or _why_not(ctx, term, form)
    edits = () if why else _edits(ctx, term, form)
    texts = [e.text for e in edits if e.text]
    use = _use(ctx, term, form, texts[-1].removeprefix(form.prefix) if texts else None)
    key = "laplacian" if form.kind == "laplacian" else "diagonal"
    why_text = f" (not rewritten: {WHY_NOT[why]})" if why else ""
    graphs = "two tf.gradients graphs" if term.inline else "one tf.gradients graph"
    return [ctx.finding(form.at or form.node, RULE.code, RULE.message(
        key, what=form.what, use=use, why=why_text,
        graphs=graphs, u=ast.unparse(term.u)), edits)]


def _use(ctx: Context, term: Term, form: Form, fixed: str | None) -> str:
    """What the message says to write: the rewrite, or the call in the code's own names,
    and then what --fix writes instead (the divergence of the loop's gradient, where `u`
    is not provably one scalar per sample)."""
    stopped = STOPPED if form.stopped else ""
    if fixed is not None and "batch_divergence" not in fixed:
        return fixed + stopped
    use = _advice(ctx, term, form) + stopped
    return use if fixed is None else f"{use}; --fix writes {fixed}" + DIVERGENCE.format(
        u=ast.unparse(term.u))


def _advice(ctx: Context, term: Term, form: Form) -> str:
    """The call to write, in the code's own names (`tf.stop_gradient` of it for a map
    with back_prop=False)."""
    text = ctx.writer.text if ctx.writer is not None else ast.unparse
    advice = ADVICE[form.kind].format(u=text(term.u), x=text(term.x))
    return f"tf.stop_gradient({advice})" if form.stopped else advice


# -- the term --------------------------------------------------------------------------------

def term_of(ctx: Context, call: ast.Call) -> Term | None:
    """The term whose outer gradient is `call`, or None."""
    first = ctx.parents.get(id(call))
    outer = pt.indexed_grad(first, ctx.names) if isinstance(first, ast.Subscript) else None
    ys = _summed_as(ctx, outer.ys) if outer is not None and outer.index == 0 else None
    var = _column_var(ys) if isinstance(ys, ast.Subscript) else None
    second, temp = _column_of(ctx, first, var) if var is not None else (None, None)
    if second is None:
        return None
    inner, inline = pt.indexed_grad(ys.value, ctx.names), True
    if inner is None and isinstance(ys.value, ast.Name):
        value = rebinding.value_at(ctx, call, ys.value.id)
        inner, inline = (pt.indexed_grad(value, ctx.names) if value is not None else None,
                         False)
    if inner is None or inner.index != 0 or ast.dump(inner.xs) != ast.dump(outer.xs):
        return None
    calls = (call, inner.call) if inline else (call,)
    return Term(second, calls, inner.ys, outer.xs, var, inline, inner.clean and outer.clean,
                temp, None if inline else ys.value.id)


def _column_of(ctx: Context, grad: ast.Subscript,
               var: str) -> tuple[ast.Subscript | None, ast.stmt | None]:
    """(`grad[:, var]`, None), or through a temporary, `h = grad` then one `h[:, var]` (the
    PDE solvers' `g = tf.gradients(grad[:, i], x)[0]; lap += g[:, i]`): (that column, the
    assignment)."""
    parent = ctx.parents.get(id(grad))
    if isinstance(parent, ast.Subscript) and parent.value is grad:
        return (parent, None) if _column_var(parent) == var else (None, None)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name) and ctx.only_uses(
                parent.targets[0].id, 2, parent)):
        return None, None
    name, block = parent.targets[0].id, ctx.block_of(parent)
    at = next((k for k, s in enumerate(block) if s is parent), len(block))
    later = block[at + 1] if at + 1 < len(block) else None
    uses = [n for n in ast.walk(later) if isinstance(n, ast.Subscript) and isinstance(
        n.value, ast.Name) and n.value.id == name] if later is not None else []
    ok = len(uses) == 1 and _column_var(uses[0]) == var
    return (uses[0], parent) if ok else (None, None)


def _summed_as(ctx: Context, ys: ast.expr) -> ast.expr:
    """`c` of `tf.expand_dims(c, axis)` or `tf.reduce_sum(c)`, which have the sum of `c` that
    tf.gradients differentiates (FermiNet's TF1 kinetic energy expands the column), else
    `ys` itself."""
    args = pt.call_args(ys, ("input", "axis")) if isinstance(ys, ast.Call) else None
    if args and ctx.names.qualname(ys) == "tf.expand_dims" and None not in args and (
            {k.arg for k in ys.keywords} <= {"input", "axis"}):
        return args[0]
    return reduce_sum_of(ys, ctx.names) or ys


def _column_var(node: ast.Subscript) -> str | None:
    """`i` of `y[:, i]` or `y[..., i]`."""
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else []
    if len(elts) != 2 or not isinstance(elts[1], ast.Name):
        return None
    lead = elts[0]
    full = isinstance(lead, ast.Slice) and lead.lower is lead.upper is lead.step is None
    ellipsis = isinstance(lead, ast.Constant) and lead.value is Ellipsis
    return elts[1].id if full or ellipsis else None


# -- how the terms are collected -------------------------------------------------------------

def _form(ctx: Context, term: Term) -> Form | None:
    """The loop over `term.var` around the term and what it does with the terms; None
    when no loop binds the variable (a single second derivative)."""
    node = ctx.parents.get(id(term.node))
    while node is not None and not isinstance(node, ast.FunctionDef | ast.Module):
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and any(
                _binds(g.target, term.var) for g in node.generators):
            return _comprehension(ctx, term, node)
        if isinstance(node, ast.For) and _binds(node.target, term.var):
            return _loop(ctx, term, node)
        if isinstance(node, ast.Lambda):
            params = [a.arg for a in node.args.args]
            return _mapped(ctx, term, node) if term.var in params else None
        node = ctx.parents.get(id(node))
    return None


def _binds(target: ast.expr, var: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(target))


def _comprehension(ctx: Context, term: Term, comp: ast.ListComp | ast.GeneratorExp) -> Form:
    what = "list comprehension" if isinstance(comp, ast.ListComp) else "generator"
    gen = comp.generators[0]
    simple = (len(comp.generators) == 1 and not gen.ifs and not gen.is_async
              and isinstance(gen.target, ast.Name) and comp.elt is term.node)
    count = pt.range_count(gen.iter, ctx.names) if simple else None
    parent = ctx.parents.get(id(comp))
    kind, node = _collected(ctx, comp, parent) if simple else (None, comp)
    if kind is None:
        return Form("laplacian", what, node or comp, count, "form")
    form = Form(kind, what, node, count, "" if count is not None else "count")
    return _named_sum(ctx, node, form) if kind == "rows" else form


def _collected(ctx: Context, comp: ast.expr, call: ast.AST) -> tuple[str | None, ast.AST]:
    """(kind, the expression replaced) for the call that takes the comprehension."""
    if not (isinstance(call, ast.Call) and call.args and call.args[0] is comp):
        return None, comp
    if isinstance(call.func, ast.Name) and call.func.id == "sum" and (
            "sum" not in ctx.names.bound) and len(call.args) == 1 and not call.keywords:
        return "laplacian", call
    name = ctx.names.qualname(call)
    if not isinstance(comp, ast.ListComp) or len(call.args) > 2:
        return None, comp
    if name == "tf.add_n" and len(call.args) == 1 and not call.keywords:
        return "laplacian", call
    if name != "tf.stack" or {k.arg for k in call.keywords} - {"axis"}:
        return None, comp
    axis = pt.call_args(call, ("values", "axis"))[1]
    text = ast.unparse(axis) if axis is not None else "0"
    if text in ("1", "-1"):
        return "diagonal", call
    if text != "0":
        return None, comp
    return ("laplacian", ctx.parents.get(id(call))) if _summed_rows(ctx, call) else (
        "rows", call)


def _named_sum(ctx: Context, rows: ast.Call, form: Form) -> Form:
    """`form` for `name = rows` summed as `tf.reduce_sum(name, axis=0)` in the next statement
    (and nowhere else): the Laplacian, replacing that sum and deleting the assignment."""
    assign = ctx.parents.get(id(rows))
    if form.kind != "rows" or not (isinstance(assign, ast.Assign) and assign.value is rows
                                   and len(assign.targets) == 1
                                   and isinstance(assign.targets[0], ast.Name)):
        return form
    name, block = assign.targets[0].id, ctx.block_of(assign)
    at = next((k for k, s in enumerate(block) if s is assign), len(block))
    if at + 1 >= len(block) or not ctx.only_uses(name, 2, assign):
        return form
    sums = [n for n in ast.walk(block[at + 1]) if isinstance(n, ast.Call) and n.args
            and isinstance(n.args[0], ast.Name) and n.args[0].id == name
            and _summed_rows(ctx, n.args[0], n)]
    if len(sums) != 1:
        return form
    return dataclasses.replace(form, kind="laplacian", node=sums[0], delete=assign, at=rows)


def _summed_rows(ctx: Context, rows: ast.expr, call: ast.AST | None = None) -> str | None:
    """"laplacian" when `rows` (dimension first) is summed right away by `call` (its parent
    when None) being `tf.reduce_sum(rows, axis=0)`, else None."""
    call = ctx.parents.get(id(rows)) if call is None else call
    ok = (isinstance(call, ast.Call) and ctx.names.qualname(call) == "tf.reduce_sum"
          and call.args and call.args[0] is rows and not (
              {k.arg for k in call.keywords} - {"axis"}) and len(call.args) <= 2)
    axis = pt.call_args(call, ("input_tensor", "axis"))[1] if ok else None
    return "laplacian" if axis is not None and ast.unparse(axis) == "0" else None


def _loop(ctx: Context, term: Term, loop: ast.For) -> Form:
    """`lap = 0` then `for i in range(n): lap += term` (or `lap = lap + term`)."""
    count = pt.range_count(loop.iter, ctx.names)
    body = [s for s in loop.body if s is not term.temp]
    acc = _accumulated(body[0], term) if len(body) == 1 and not loop.orelse else None
    block = ctx.block_of(loop)
    at = next((k for k, s in enumerate(block) if s is loop), 0)
    init = block[at - 1] if acc and at > 0 else None
    zero = (isinstance(init, ast.Assign) and len(init.targets) == 1
            and isinstance(init.targets[0], ast.Name) and init.targets[0].id == acc
            and isinstance(init.value, ast.Constant) and init.value.value == 0
            and type(init.value.value) in (int, float))
    if not zero:
        return Form("laplacian", "for loop", loop, count, "form")
    why = "count" if count is None else "index" if leaks(ctx, loop) else ""
    return Form("laplacian", "for loop", loop, count, why, init, f"{acc} = ")


def _accumulated(stmt: ast.stmt, term: Term) -> str | None:
    """`lap` of the statement `lap += term` or `lap = lap + term`."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(
            stmt.target, ast.Name) and stmt.value is term.node:
        return stmt.target.id
    ok = (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
          and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.BinOp)
          and isinstance(stmt.value.op, ast.Add) and stmt.value.right is term.node
          and isinstance(stmt.value.left, ast.Name)
          and stmt.value.left.id == stmt.targets[0].id)
    return stmt.targets[0].id if ok else None


def _mapped(ctx: Context, term: Term, fn: ast.Lambda) -> Form | None:
    """`tf.map_fn(lambda i: term, tf.range(n))`: the diagonal, dimension first."""
    call = ctx.parents.get(id(fn))
    if not (isinstance(call, ast.Call) and ctx.names.qualname(call) == "tf.map_fn"
            and call.args and call.args[0] is fn):
        return None
    args = pt.call_args(call, ("fn", "elems"))
    count = pt.range_count(args[1], ctx.names, tf_range=True) if args and args[1] else None
    if not (single_expression(fn) is term.node and len(fn.args.args) == 1):
        return Form("rows", "tf.map_fn", call, count, "form")
    why = "" if count is not None else "count"
    back_prop = next((k.value for k in call.keywords if k.arg == "back_prop"), None)
    stopped = isinstance(back_prop, ast.Constant) and back_prop.value is False
    if len(call.args) > 3 or {k.arg for k in call.keywords} - _MAP_KEYWORDS or not (
            back_prop is None or isinstance(back_prop, ast.Constant)
            and back_prop.value in (True, False)):
        why = "map"
    if _summed_rows(ctx, call):
        return Form("laplacian", "tf.map_fn", ctx.parents.get(id(call)), count, why,
                    stopped=stopped)
    return _named_sum(ctx, call, Form("rows", "tf.map_fn", call, count, why,
                                      stopped=stopped))


# -- the rewrite -----------------------------------------------------------------------------

def _why_not(ctx: Context, term: Term, form: Form) -> str:
    """The key of WHY_NOT that keeps the form from being rewritten, "" when none does."""
    names = ctx.names
    if not term.clean:
        return "arguments"
    if facts.matrix(ctx, term) is None:
        return "rank"
    if not pt.is_pure_count(form.count, names):
        return "count"
    if facts.unbatched(ctx, term.u):
        return "scalar"
    pure = pt.is_pure(term.u, names) and pt.is_pure(term.x, names)
    if not pure or (not term.inline and not facts.stable(ctx, term)):
        return "impure"
    if not term.inline and not rebinding.same_objects(
            ctx, (term.u, term.x), ctx.statement_of(term.u), ctx.statement_of(form.node)):
        return "moved"
    return "shared" if form.delete is not None and facts.shares_line(ctx, form.delete) else ""


def _edits(ctx: Context, term: Term, form: Form) -> tuple[Edit, ...]:
    w = ctx.writer
    if w is None:
        return ()
    x = w.text(term.x)
    known = facts.matrix(ctx, term)
    whole = shapes.covers(ctx.tree, form.count, term.x, known, ctx.names)
    target = w.rows(pt.Rows(term.u, 0, None))
    scalar = facts.per_sample_scalar(ctx, term)
    rows = samples.Samples(ctx.tree, term.x, ctx.names, rebinding.definer(
        ctx, term.u)).independent(term.u)
    if form.kind == "laplacian" and whole and scalar and rows:
        text = w.call("batch_laplacian", w.text(term.u), x)
    elif form.kind == "laplacian" and whole:  # the divergence of the loop's own gradient
        gradient = term.gradient or f"{w.tf}.gradients({w.text(term.u)}, {x})[0]"
        text = w.call("batch_divergence", gradient, x)
    else:
        strategy = () if rows else ('strategy="reverse"',)
        text = w.call("batch_hessian_diagonal", w.text(term.u) if scalar else target, x,
                      *strategy)
        text = text if whole else f"{text}[:, :{w.text(form.count)}]"
        if form.kind == "laplacian":
            text = f"{w.tf}.reduce_sum({text}, axis=1)"
        elif form.kind == "rows":
            text = f"{w.tf}.transpose({text})"
    text = f"{w.tf}.stop_gradient({text})" if form.stopped else text
    deleted = (ctx.delete(form.delete),) if form.delete is not None else ()
    return (*deleted, ctx.replace(form.node, form.prefix + text))


RULE = Rule(
    code="CG111", name="laplacian-loop", fix="rewrite where the shapes prove it",
    summary=("tf.gradients(tf.gradients(u, x)[0][:, i], x)[0][:, i] per dimension: a "
             "hand-built Laplacian or Hessian diagonal"),
    messages={
        "laplacian": ("hand-built Laplacian: {graphs} per dimension in a {what}; use "
                      "{use}{why}" + NOTE),
        "diagonal": ("hand-built Hessian diagonal: {graphs} per dimension in a {what}; use "
                     "{use}{why}" + NOTE),
    },
    docs=DOCS, visits="rows", check=check, why_not=WHY_NOT)
