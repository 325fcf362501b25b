"""Finds the legacy gradient idioms in one parsed module, with `ast` only (no LibCST here:
scanning must stay fast), and attaches an exact rewrite where one is provable."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rowloops, scopes
from compat_grads.migrate.names import Names

_PRIVATE = ("tensorflow.python.ops.parallel_for", "tensorflow.python.ops.gradients_impl")
_TAPE_METHODS = ("gradient", "jacobian", "batch_jacobian")
# The private modules as Names spells them, and what replaces their functions.
_PRIVATE_CANONICAL = tuple("tf." + m.removeprefix("tensorflow.") for m in _PRIVATE)
_PRIVATE_REPLACEMENTS = {"jacobian": "cg.stacked_jacobian(y, x)",
                         "batch_jacobian": "cg.batch_jacobian(y, x)",
                         "hessians": "[cg.hessian(tf.reduce_sum(y), x)]",
                         "gradients": "tf.GradientTape, or cg.stacked_jacobian / "
                                      "cg.per_element_gradients",
                         "pfor": "tf.vectorized_map, or cg.stacked_jacobian / "
                                 "cg.batch_jacobian for Jacobians",
                         "for_loop": "tf.map_fn or tf.while_loop",
                         "_hessian_vector_product": "cg.hvp(f, x, v)"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
# The line ends of the Python tokenizer (str.splitlines also splits on \f, \v, \x1c-\x1e,
# \x85, \u2028 and \u2029, which would shift every line and column after them).
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace the code from `start` to `end` ((line, column), 1-based lines, 0-based
    character columns, end exclusive) by `text`; `text` None deletes the statement there."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str | None


@dataclasses.dataclass(frozen=True)
class Finding:
    """One legacy idiom at `line`:`col` (both 1-based; col counts characters)."""

    line: int
    col: int
    code: str
    message: str
    edits: tuple[Edit, ...] = ()
    imports: tuple[str, ...] = ()


def find(tree: ast.Module, source: str, names: Names) -> list[Finding]:
    """All findings in `tree` (parsed from `source`), sorted by position."""
    return sorted(_Finder(tree, source, names).run(), key=lambda f: (f.line, f.col, f.code))


class _Finder:
    def __init__(self, tree: ast.Module, source: str, names: Names):
        self.tree, self.source, self.names = tree, source, names
        self.lines = _LINE_END.split(source)
        self.nodes = list(ast.walk(tree))
        self.parents = {id(c): p for p in self.nodes for c in ast.iter_child_nodes(p)}
        self.handled: set[int] = set()
        tf, self.imports = names.prefix("tf"), []
        if tf is None and "tf" not in names.bound:
            tf, self.imports = "tf", ["import tensorflow as tf"]
        cg = names.prefix("compat_grads")
        if cg is None:
            cg = "cg" if "cg" not in names.bound else "compat_grads"
            self.imports.append("import compat_grads" + (" as cg" if cg == "cg" else ""))
        self.writer = pt.Writer(source, names, tf, cg) if tf else None

    def run(self) -> list[Finding]:
        # Row loops first: the gradient calls they hold are theirs, not CG101 / CG110 ones.
        found = [f for node in self.nodes if isinstance(node, ast.Call)
                 for f in self._row_loop(node)]
        for node in self.nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += self._private_import(node)
            elif isinstance(node, ast.Call):
                found += self._call(node)
        grads = [n for n in self.nodes if isinstance(n, ast.Call)
                 and self.names.qualname(n) == "tf.gradients" and id(n) not in self.handled]
        return found + [f for g in grads for f in self._gradients(g)]

    def _call(self, node: ast.Call) -> list[Finding]:
        name = self.names.qualname(node)
        if name == "tf.map_fn":
            return self._map_fn(node)
        if name == "tf.stack":
            return self._stack(node)
        if name == "tf.hessians":
            return self._hessians(node)
        if name == "tf.keras.backend.gradients":
            return [self._finding(node, "CG108", "K.gradients is graph-only and gone in "
                                  "Keras 3; use tf.GradientTape, or cg.stacked_jacobian / "
                                  "cg.per_element_gradients for Jacobian-type derivatives")]
        if name is not None and name.startswith(_PRIVATE_CANONICAL):
            return self._private_call(node, name)
        return self._tape_call(node)

    # -- positions and findings ------------------------------------------------------------

    def _pos(self, line: int, byte_col: int) -> tuple[int, int]:
        """ast columns count UTF-8 bytes; LibCST and people count characters."""
        return line, len(self.lines[line - 1].encode()[:byte_col].decode(errors="replace"))

    def _span(self, node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
        return (self._pos(node.lineno, node.col_offset),
                self._pos(node.end_lineno, node.end_col_offset))

    def _finding(self, node: ast.AST, code: str, message: str,
                 edits: tuple[Edit, ...] = ()) -> Finding:
        line, col = self._pos(node.lineno, node.col_offset)
        return Finding(line, col + 1, code, message, edits, tuple(self.imports) if edits else ())

    def _replace(self, node: ast.AST, text: str) -> Edit:
        return Edit(*self._span(node), text)

    # -- CG101 / CG106: tf.gradients in a loop, or of tf.gradients ---------------------------

    def _gradients(self, call: ast.Call) -> list[Finding]:
        loop = self._enclosing_loop(call)
        if loop is not None:
            edits = (self._loop_edits(call, loop) if isinstance(loop, ast.For)
                     else self._comprehension_edits(loop))
            what = "for loop" if isinstance(loop, ast.For) else "list comprehension"
            unit, advice = self._row_advice([call])
            why = "" if edits else self._why_not(call, loop)
            return [self._finding(call, "CG101", f"hand-built Jacobian: one tf.gradients graph "
                                  f"per {unit} in a {what}; use "
                                  f"{self._suggest(edits, advice)}{why}", edits)]
        parts = pt.grad_parts(call)
        if parts and self._scoped_key(call, parts[1]) in self._grad_ys_keys:
            return [self._forward_trick(call, parts[2])]
        return []

    def _forward_trick(self, call: ast.Call, all_ones: bool) -> Finding:
        """CG106 on `tf.gradients(g, dummy)`, `dummy` the grad_ys of the gradient `g`: with
        no grad_ys here (tangents of ones) it is d(dummy·J)/d(dummy)·1 = J·1."""
        trick = "forward-mode trick (tf.gradients with respect to grad_ys): "
        if not all_ones:
            return self._finding(call, "CG106", f"{trick}a Jacobian-vector product J·v; use "
                                 "cg.jvp(f, x, v), or cg.per_element_gradients(U, x) when v "
                                 "is all ones (not rewritten: the second tf.gradients has "
                                 "grad_ys or other arguments that change its values)")
        edits, why = self._per_element_edits(call)
        use = edits[0].text if edits else (
            f"cg.per_element_gradients(U, x) (not rewritten: {why})")
        return self._finding(call, "CG106", f"{trick}with no grad_ys on the second "
                             "tf.gradients this is exactly cg.per_element_gradients(U, x) "
                             f"(dy/dx with U's shape); use {use}", edits)

    def _per_element_edits(self, call: ast.Call) -> tuple[tuple[Edit, ...], str]:
        """`tf.gradients(g, dummy)[0]` -> `cg.per_element_gradients(U, x)` where this scope
        binds `g = tf.gradients(U, x, grad_ys=dummy)[0]` once and `dummy` once, to a fresh
        tensor of U's shape used nowhere else; else ((), why not)."""
        scope, (g, dummy, _) = self._scope(call), pt.grad_parts(call)
        outer = self.parents.get(id(call))
        if not (isinstance(outer, ast.Subscript) and _is_zero(outer.slice)):
            return (), "the result is not taken with [0]"
        first = scopes.assigned_value(scope, g.id) if isinstance(g, ast.Name) else None
        grad = self._vjp_of(first, dummy)
        if grad is None or self.writer is None:
            return (), ("the differentiated gradient is not g = tf.gradients(U, x, "
                        "grad_ys=dummy)[0], bound once in this scope")
        why = self._operands_why_not(scope, grad) or self._dummy_why_not(scope, grad, dummy)
        if why:
            return (), why
        w = self.writer
        text = w.call("per_element_gradients", w.text(grad.ys), w.source_of(grad))
        return (self._replace(outer, text), *self._spent(scope, outer, g.id, dummy.id)), ""

    def _spent(self, scope: ast.AST, at: ast.AST, g: str, dummy: str) -> tuple[Edit, ...]:
        """Deletions of `g = ...` and `dummy = ...`, which the rewrite at `at` leaves unused,
        when they are statements of its block (deleting them leaves no block empty)."""
        stmt = at
        while not isinstance(stmt, ast.stmt):
            stmt = self.parents.get(id(stmt))
        assigns = [s for s in self._block_of(stmt) if isinstance(s, ast.Assign)
                   and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                   and s.targets[0].id in (g, dummy)]
        if len(assigns) != 2 or len(scopes.references(scope, {g})) != 2:
            return ()
        return tuple(Edit(*self._span(s), None) for s in assigns)

    def _vjp_of(self, value: ast.expr | None, dummy: ast.expr) -> pt.Grad | None:
        """`tf.gradients(U, x, grad_ys=dummy)[0]` (no other argument that changes values)."""
        grad = pt.indexed_grad(value, self.names) if value is not None else None
        args = pt.call_args(grad.call, ("ys", "xs", "grad_ys")) if grad else None
        extra = {k.arg for k in grad.call.keywords} - {"ys", "xs", "grad_ys"} if grad else set()
        if not args or grad.index != 0 or len(grad.call.args) > 3 or extra - pt.NEUTRAL_KWARGS:
            return None
        return grad if ast.dump(args[2]) == ast.dump(dummy) else None

    def _operands_why_not(self, scope: ast.AST, grad: pt.Grad) -> str:
        """Why U and x may not be evaluated again where the second call is ("" if they may)."""
        if any(isinstance(n, ast.List | ast.Tuple) for n in (grad.ys, grad.xs)):
            return "U or x is a list of several targets or sources"
        counts = scopes.bindings(scope)
        once = all(counts[n] <= 1 for n in _names_in(grad.ys) | _names_in(grad.xs))
        if not (once and pt.is_pure(grad.ys, self.names) and pt.is_pure(grad.xs, self.names)):
            return ("U or x is not a plain expression of names bound once in this scope (the "
                    "rewrite evaluates them where the second tf.gradients is)")
        return ""

    def _dummy_why_not(self, scope: ast.AST, grad: pt.Grad, dummy: ast.expr) -> str:
        """Why the dummy may matter to the result ("" if it provably does not)."""
        named = isinstance(dummy, ast.Name)
        value = scopes.assigned_value(scope, dummy.id) if named else None
        if value is None or not pt.shaped_like(value, grad.ys, self.names):
            return ("the dummy is not a name bound once in this scope to tf.ones_like(U), "
                    "tf.zeros_like(U), or tf.ones / tf.zeros / tf.fill of tf.shape(U); any "
                    "other dummy, a placeholder say, may have another, broadcastable shape, "
                    "which gives another result")
        if len(scopes.references(scope, {dummy.id})) != 3:
            return "the dummy is used elsewhere too (U or x could depend on it)"
        return ""

    def _why_not(self, call: ast.Call, loop: ast.For | ast.comprehension) -> str:
        """` (not rewritten: ...)`: why a row loop was left as it is, in a few words."""
        parts, shape = pt.grad_parts(call), self._loop_of(loop)
        array = rowloops.array_of(parts[0], shape.var, self.names) if parts and shape else None
        wrapper = rowloops.wrapper(call, self.parents, self.names)
        if parts is None or not parts[2]:
            reason = "tf.gradients has arguments that change its values (grad_ys, ...)"
        elif shape is None or not self._visits(parts[0], loop):
            reason = "the row is not y[i], y[:, i], tf.gather(y, i) or an element of tf.unstack(y)"
        elif shape.why:
            reason = shape.why
        elif not all(pt.is_pure(n, self.names) for n in (array, parts[1]) if n is not None):
            reason = "y or x is computed anew for every row"
        elif wrapper is not None:
            reason = (f"each row goes through {wrapper} before it is collected; only the "
                      "gradient itself, or tf.expand_dims(row, 0), is rewritten")
        elif isinstance(loop, ast.comprehension):
            reason = ("the rows are not stacked along axis 0 right away (a tf.stack of the "
                      "list, or a list assigned and stacked on the next line)")
        else:
            reason = ("the loop does more than collect the rows and stack them right after "
                      "(other statements, other uses of the list or the index)")
        return f" (not rewritten: {reason})"

    def _row_advice(self, grads: list[ast.Call]) -> tuple[str, str]:
        """("row" or "column", what replaces a loop over `tf.gradients(y[i], x)`): over
        columns `y[:, i]` each gradient sums its column over the rows, so the stack is the
        Jacobian of the row sum."""
        parts = [pt.grad_parts(g) for g in grads]
        if parts and all(p is not None and _column(p[0]) for p in parts):
            return "column", ("cg.stacked_jacobian(tf.reduce_sum(y, axis=0), x) (tf.gradients "
                              "sums each column y[:, i] over its rows)")
        return "row", "cg.stacked_jacobian(y, x)"

    def _suggest(self, edits: tuple[Edit, ...], fallback: str) -> str:
        texts = [e.text for e in edits if e.text]
        return texts[-1] if texts else fallback

    def _enclosing_loop(self, call: ast.Call) -> ast.For | ast.comprehension | None:
        """The for loop or comprehension whose variable indexes the target `y[i]` / `y[:, i]`
        (or is the target, iterating over `tf.unstack(y)`)."""
        parts = pt.grad_parts(call)
        node = call
        while parts and not isinstance(node, _SCOPES):
            node = self.parents.get(id(node))
            loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
            for loop in loops:
                if self._loop_of(loop) is not None and self._visits(parts[0], loop):
                    return loop
        return None

    def _visits(self, target: ast.expr, loop: ast.For | ast.comprehension) -> bool:
        shape = self._loop_of(loop)
        var, iterable = shape.var, shape.iterable
        if isinstance(target, ast.Name):
            return target.id == var and (rowloops.is_unstack(iterable, self.names)
                                         or self.names.is_tensor(iterable))
        if pt.gathered(target, var, self.names) is not None:
            return True
        return isinstance(target, ast.Subscript) and any(
            isinstance(n, ast.Name) and n.id == var for n in ast.walk(target.slice))

    def _loop_of(self, loop: ast.For | ast.comprehension) -> rowloops.Loop | None:
        """The loop as the rewrite reads it (see `rowloops.loop_of`), looked at once."""
        if id(loop) not in self._loops_seen:
            comp = self.parents.get(id(loop)) if isinstance(loop, ast.comprehension) else None
            first = comp is None or comp.generators[0] is loop  # evaluated outside
            stmt = self._statement_of(loop)
            self._loops_seen[id(loop)] = rowloops.loop_of(
                loop.target, loop.iter, comp or self._scope(loop),
                self._scope(loop) if first else None, self._block_of(stmt), stmt, self.names)
        return self._loops_seen[id(loop)]

    @functools.cached_property
    def _loops_seen(self) -> dict[int, rowloops.Loop | None]:
        return {}

    def _statement_of(self, node: ast.AST) -> ast.stmt | None:
        while node is not None and not isinstance(node, ast.stmt):
            node = self.parents.get(id(node))
        return node

    @functools.cached_property
    def _grad_ys_keys(self) -> set[tuple[int, str]]:
        """(scope, expression) of every `grad_ys=` operand (a name, an attribute such as
        `self.dummy`, or a subscript) of a tf.gradients call: the forward-mode trick then
        differentiates with respect to the same expression in the same function."""
        keys = set()
        for node in self.nodes:
            if isinstance(node, ast.Call) and self.names.qualname(node) == "tf.gradients":
                args = pt.call_args(node, ("ys", "xs", "grad_ys"))
                if args and args[2] is not None:
                    keys.add(self._scoped_key(node, args[2]))
        return keys - {None}

    def _scoped_key(self, at: ast.AST, operand: ast.expr) -> tuple[int, str] | None:
        if not isinstance(operand, ast.Name | ast.Attribute | ast.Subscript):
            return None
        return id(self._scope(at)), ast.dump(operand)

    # -- CG101 fix: `L = []; for ...: L.append(g)`, or a cache filled in a loop ------------

    def _loop_edits(self, call: ast.Call, loop: ast.For) -> tuple[Edit, ...]:
        shape = self._loop_of(loop)
        if self.writer is None or loop.orelse or shape.why or self._leaks(loop):
            return ()
        return self._fill_edits(loop) or self._list_edits(loop)

    def _list_edits(self, loop: ast.For) -> tuple[Edit, ...]:
        """`L = []; for i in it: L.append(g_i)`: then `J = tf.stack(L)` becomes one Jacobian
        (or `gradient_rows`); a list used otherwise becomes `gradient_row_list`."""
        block = self._block_of(loop)
        at = next((i for i, s in enumerate(block) if s is loop), None)
        if at is None or at == 0:
            return ()
        init = block[at - 1]
        listed = _list_init(init)
        element = self._appended(loop, listed) if listed else None
        if element is None:
            return ()
        var, iterable = self._loop_of(loop).var, self._loop_of(loop).iterable
        stacked = self._stacked_name(block[at + 1]) if at + 1 < len(block) else None
        if stacked is not None and pt.call_args(stacked, ("values",))[0].id == listed and (
                self._only_uses(listed, 3, loop)):
            text = self._rows_text(element, var, iterable)
            return (Edit(*self._span(init), None), Edit(*self._span(loop), None),
                    self._replace(stacked, text)) if text else ()
        inside = [n for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == listed]
        text = self._helper_text(element, var, iterable, "gradient_row_list")
        if len(inside) != 1 or text is None:
            return ()
        return self._replace(init.value, text), Edit(*self._span(loop), None)

    def _fill_edits(self, loop: ast.For) -> tuple[Edit, ...]:
        """`for i in it: if C[i] is None: C[i] = g_i` (a cache of rows filled on demand)."""
        body, shape = loop.body, self._loop_of(loop)
        var = shape.var
        check = body[0] if len(body) == 1 and isinstance(body[0], ast.If) else None
        if check is None or check.orelse or len(check.body) != 1:
            return ()
        cache, assign = _none_entry(check.test, var), check.body[0]
        if cache is None or not (isinstance(assign, ast.Assign) and len(assign.targets) == 1):
            return ()
        if ast.dump(_entry_of(assign.targets[0], var) or ast.Pass()) != ast.dump(cache):
            return ()
        text = self._helper_text(assign.value, var, shape.iterable, "fill_gradient_rows",
                                 cache=cache)
        return (self._replace(loop, text),) if text else ()

    # -- CG101 fix: `L = [g for i in ...]` then `tf.stack(L)` on the next statement ---------

    def _comprehension_edits(self, gen: ast.comprehension) -> tuple[Edit, ...]:
        comp = self.parents.get(id(gen))
        if not (isinstance(comp, ast.ListComp) and len(comp.generators) == 1 and not gen.ifs
                and not gen.is_async and not self._loop_of(gen).why):
            return ()
        return self._stacked_comprehension(comp) or self._listed_comprehension(comp)

    def _stacked_comprehension(self, comp: ast.ListComp) -> tuple[Edit, ...]:
        """`L = [g for i in ...]` then `tf.stack(L)` on the next statement."""
        gen, assign = comp.generators[0], self.parents.get(id(comp))
        if not (isinstance(assign, ast.Assign) and assign.value is comp
                and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
            return ()
        block, listed = self._block_of(assign), assign.targets[0].id
        at = next((i for i, s in enumerate(block) if s is assign), None)
        if at is None or at + 1 >= len(block) or not self._only_uses(listed, 2, assign):
            return ()
        stacked = self._stacked_name(block[at + 1])
        if stacked is None or pt.call_args(stacked, ("values",))[0].id != listed:
            return ()
        shape = self._loop_of(gen)
        text = self._rows_text(comp.elt, shape.var, shape.iterable)
        return (Edit(*self._span(assign), None), self._replace(stacked, text)) if text else ()

    def _listed_comprehension(self, comp: ast.ListComp) -> tuple[Edit, ...]:
        """`[g_i for i in it]` kept as a list, or `[g_i if C[i] is None else C[i] for ...]`
        (a cache of rows): `gradient_row_list`."""
        gen, element, cache = comp.generators[0], comp.elt, None
        var = self._loop_of(gen).var
        if isinstance(element, ast.IfExp):
            cache = _none_entry(element.test, var)
            kept = _entry_of(element.orelse, var)
            if cache is None or kept is None or ast.dump(kept) != ast.dump(cache):
                return ()
            element = element.body
        text = self._helper_text(element, var, self._loop_of(gen).iterable, "gradient_row_list",
                                 cached=cache)
        return (self._replace(comp, text),) if text else ()

    def _block_of(self, stmt: ast.stmt) -> list[ast.stmt]:
        parent = self.parents.get(id(stmt))
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block
        return []

    def _appended(self, loop: ast.For, listed: str) -> ast.expr | None:
        """The appended gradient expression, through at most one temporary variable."""
        body, var = loop.body, self._loop_of(loop).var
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
        if name == var or len(used) != 1 or not self._only_uses(name, 2, loop):
            return None
        if unpacked:  # marked by the index None: see `_row_grad`
            value = ast.Subscript(value=temp.value, slice=ast.Constant(None), ctx=ast.Load())
            return value if isinstance(append, ast.Name) else None
        return _inline(append, name, temp.value)

    def _stacked_name(self, stmt: ast.stmt) -> ast.Call | None:
        """The one `tf.stack(L)` (axis 0, `L` a name) in a plain assignment or a return,
        possibly inside other calls (`tf.reshape(tf.stack(L), ...)`)."""
        plain = isinstance(stmt, ast.Return) or (isinstance(stmt, ast.Assign)
                                                 and len(stmt.targets) == 1)
        stacks = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)
                  and self.names.qualname(n) == "tf.stack"] if plain and stmt.value else []
        if len(stacks) != 1:
            return None
        value = stacks[0]
        args = pt.call_args(value, ("values", "axis"))
        ok = args and isinstance(args[0], ast.Name) and _axis_zero(args[1])
        return value if ok and set(k.arg for k in value.keywords) <= {"values", "axis"} else None

    def _only_uses(self, name: str, count: int, inside: ast.AST) -> bool:
        """Whether the variable `name` of the scope around `inside` occurs exactly `count`
        times (a nested scope's own `name` is another variable)."""
        return len(scopes.references(self._scope(inside), {name})) == count

    def _leaks(self, loop: ast.For) -> bool:
        """Whether the loop variable is read after the loop (where it holds the last index)."""
        var, inside = self._loop_of(loop).var, {id(n) for n in ast.walk(loop)}
        uses = scopes.references(self._scope(loop), {var})
        reads = [n for n in ast.walk(self._scope(loop)) if id(n) in uses
                 and isinstance(n.ctx, ast.Load) and id(n) not in inside]
        return any(self._binder(n, var) is None for n in reads)

    def _binder(self, node: ast.AST, var: str) -> ast.AST | None:
        """The loop or comprehension around `node` that binds `var`, or None."""
        while not isinstance(node, _SCOPES):
            node = self.parents.get(id(node))
            loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
            if any(var in _names_in(g.target) for g in loops):  # `k, v in enumerate(...)` too
                return node
        return None

    def _rows_text(self, element: ast.expr, var: str, iterable: ast.expr) -> str | None:
        """The rewrite of stacking `element` over `var in iterable`: a Jacobian when the
        source proves it equal, else the runtime-checked `cg.migrate.gradient_rows`."""
        return (self._jacobian_text(element, var, iterable, "range")
                or self._helper_text(element, var, iterable))

    def _helper_text(self, element: ast.expr, var: str, iterable: ast.expr,
                     function: str = "gradient_rows", cache: ast.expr | None = None,
                     cached: ast.expr | None = None) -> str | None:
        """`cg.migrate.<function>([cache, ]y, xs, iterable, axis=..., index=...[, cached=])`
        for rows `y[i]` or columns `y[:, i]` of `tf.gradients(...)[k]`. It evaluates `y`,
        `xs`, the cache and the iterable once, as the loop does for the iterable: they must
        be pure, and the loop variable must appear in the row index only."""
        expand = _expand_dims_zero(element, self.names)
        if expand is not None and function != "gradient_rows":
            return None
        grad = self._row_grad(expand if expand is not None else element)
        axis = _row_axis(grad.ys, var) if grad is not None and grad.clean else None
        if axis is None or self.writer is None:
            return None
        ys, caches = grad.ys.value, [c for c in (cache, cached) if c is not None]
        if not all(pt.is_pure(n, self.names) for n in (ys, grad.xs, *caches)):
            return None
        if var in set().union(*map(_names_in, (ys, grad.xs, iterable, *caches))):
            return None
        w = self.writer
        args = [w.text(cache)] if cache is not None else []
        args += [w.text(ys), w.text(grad.xs), w.text(iterable)]
        args += [f"axis={axis}"] if axis else []
        args += [f"index={grad.index}"] if grad.index != 0 else []
        args += [f"cached={w.text(cached)}"] if cached is not None else []
        text = w.call(f"migrate.{function}", *args)
        return f"{w.tf}.expand_dims({text}, axis=1)" if expand is not None else text

    def _row_grad(self, node: ast.expr) -> pt.Grad | None:
        """`tf.gradients(...)[k]`, or the call unpacked by `(g,) = ...` (index None)."""
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and (
                node.slice.value is None):
            parts = pt.grad_parts(node.value) if isinstance(node.value, ast.Call) and (
                self.names.qualname(node.value) == "tf.gradients") else None
            return pt.Grad(node.value, parts[0], parts[1], None, parts[2]) if parts else None
        return pt.indexed_grad(node, self.names)

    def _jacobian_text(self, element: ast.expr, var: str, iterable: ast.expr, kind: str,
                       function: str = "stacked_jacobian") -> str | None:
        """The rewrite of stacking `element` over `var in iterable`, or None."""
        expand = _expand_dims_zero(element, self.names)
        grad = pt.indexed_grad(expand if expand is not None else element, self.names)
        if grad is None or not grad.clean:
            return None
        count = pt.range_count(iterable, self.names, tf_range=kind == "tf.range")
        rows = (pt.index_rows(grad.ys, var, count, self.names) if count is not None
                else pt.unstack_rows(grad.ys, var, iterable, self.names))
        source = self.writer.source_of(grad) if rows else None
        if source is None or var in _names_in(grad.xs):
            return None
        text = self.writer.call(function, self.writer.rows(rows), source)
        return f"{self.writer.tf}.expand_dims({text}, axis=1)" if expand is not None else text

    # -- CG102: tf.stack([tf.gradients(...)[0] for ...]) ------------------------------------

    def _stack(self, node: ast.Call) -> list[Finding]:
        args = pt.call_args(node, ("values", "axis"))
        comp = args[0] if args else None
        if not isinstance(comp, ast.ListComp):
            return []
        grads = [n for n in ast.walk(comp.elt) if isinstance(n, ast.Call)
                 and self.names.qualname(n) == "tf.gradients"]
        if not grads or not any(self._enclosing_loop(g) in comp.generators for g in grads):
            return []
        self.handled |= {id(g) for g in grads}
        edits = self._stack_edits(node, comp, args[1])
        unit, advice = self._row_advice(grads)
        why = "" if edits else self._why_not(grads[0], comp.generators[0])
        return [self._finding(node, "CG102", "hand-built Jacobian: tf.stack of one "
                              f"tf.gradients graph per {unit}; use "
                              f"{self._suggest(edits, advice)}{why}", edits)]

    def _stack_edits(self, node: ast.Call, comp: ast.ListComp,
                     axis: ast.expr | None) -> tuple[Edit, ...]:
        extra = {k.arg for k in node.keywords} - {"values", "axis"}
        if self.writer is None or extra or not _axis_zero(axis) or len(comp.generators) != 1:
            return ()
        gen = comp.generators[0]
        shape = self._loop_of(gen)
        if gen.ifs or gen.is_async or shape is None or shape.why:
            return ()
        text = self._rows_text(comp.elt, shape.var, shape.iterable)
        return (self._replace(node, text),) if text else ()

    # -- CG103: tf.map_fn(fn calling tf.gradients, elems) -----------------------------------

    def _map_fn(self, node: ast.Call) -> list[Finding]:
        args = pt.call_args(node, ("fn", "elems"))
        fn = self._function(args[0]) if args else None
        grads = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                 and self.names.qualname(n) == "tf.gradients"] if fn else []
        if not grads:
            return []
        self.handled |= {id(g) for g in grads}
        over_indices = isinstance(args[1], ast.Call) and self.names.qualname(
            args[1]) == "tf.range"
        edits = self._map_fn_edits(node, fn, args[1], over_indices)
        if not edits and not over_indices and self._wrt_element(fn, grads) and (
                self.writer is not None and len(node.args) <= 2):
            edits = (self._replace(node.func, f"{self.writer.cg}.migrate.gradient_map_fn"),)
        if over_indices:
            problem = "one gradient graph per element in a while_loop (slow)"
        elif self._wrt_element(fn, grads):
            problem = ("one gradient per element, run one after another in a while_loop (it "
                       "works, slowly)")
        else:
            problem = ("tf.gradients of a mapped value fails at run time (TensorArray read "
                       "twice)")
        fallback = ("cg.batch_jacobian(f(xs), xs) when each element's result depends on that "
                    "element only" if not over_indices and self._wrt_element(fn, grads)
                    else "cg.stacked_jacobian(y, x) or cg.per_element_gradients(y, x)")
        if edits and edits[0].text.endswith(".migrate.gradient_map_fn"):
            fallback += (", or cg.migrate.gradient_map_fn in place of tf.map_fn (same "
                         "arguments; it maps every element at once when it can)")
            edits_text = ()
        else:
            edits_text = edits
        return [self._finding(node, "CG103", f"tf.map_fn with tf.gradients: {problem}; use "
                              f"{self._suggest(edits_text, fallback)}", edits)]

    def _function(self, fn: ast.expr | None,
                  at: ast.AST | None = None) -> ast.Lambda | ast.FunctionDef | None:
        """The lambda, or the one definition of the named function (the one in the scope of
        `at` when several functions have that name)."""
        if isinstance(fn, ast.Lambda):
            return fn
        defs = self.names.functions.get(fn.id, []) if isinstance(fn, ast.Name) else []
        if len(defs) > 1 and at is not None:
            defs = [d for d in defs if self._scope(d) is self._scope(at)]
        return defs[0] if len(defs) == 1 else None

    def _wrt_element(self, fn: ast.Lambda | ast.FunctionDef, grads: list[ast.Call]) -> bool:
        """Whether every gradient in the mapped function is with respect to its element."""
        params = scopes.references(fn, {a.arg for a in fn.args.args})
        parts = [pt.grad_parts(g) for g in grads]
        return all(p is not None and _refers(p[1], params) for p in parts)

    def _map_fn_edits(self, node: ast.Call, fn: ast.Lambda | ast.FunctionDef,
                      elems: ast.expr, over_indices: bool) -> tuple[Edit, ...]:
        body = _single_expression(fn)
        params = [a.arg for a in fn.args.args]
        if self.writer is None or body is None or elems is None or len(params) != 1 or (
                not self._same_scope(node, fn)):
            return ()
        summed = _reduce_sum_of(body, self.names)
        if summed is not None:  # the sum of tf.expand_dims(g, 0) is the sum of g
            summed = _expand_dims_zero(summed, self.names) or summed
        element = summed if summed is not None else body
        function = "stacked_jacobian" if summed is None else "per_element_gradients"
        if over_indices:
            text = self._jacobian_text(element, params[0], elems, "tf.range", function)
        else:
            text = self._values_text(element, params[0], elems, function)
        return (self._replace(node, text),) if text else ()

    def _values_text(self, element: ast.expr, param: str, elems: ast.expr,
                     function: str) -> str | None:
        grad = pt.indexed_grad(element, self.names)
        if grad is None or not grad.clean or not isinstance(grad.ys, ast.Name):
            return None
        if grad.ys.id != param or param in _names_in(grad.xs) or not pt.is_pure(
                elems, self.names) or not self.names.is_tensor(elems):
            return None  # elems that may be a nest map a tuple per element
        source = self.writer.source_of(grad)
        rows = self.writer.rows(pt.Rows(elems, 0, None))
        return self.writer.call(function, rows, source) if source else None

    def _same_scope(self, node: ast.AST, fn: ast.AST) -> bool:
        """A named function must be defined in the scope of the call (same closure names)."""
        if isinstance(fn, ast.Lambda):
            return True
        return self._scope(node) is self._scope(fn)

    def _scope(self, node: ast.AST) -> ast.AST | None:
        """The function, class or module around `node`; None for a node of another tree
        (a notebook's functions are shared by all its cells)."""
        node = self.parents.get(id(node))
        while node is not None and not isinstance(node, _SCOPES):
            node = self.parents.get(id(node))
        return node

    # -- CG105: tf.hessians ------------------------------------------------------------------

    def _hessians(self, node: ast.Call) -> list[Finding]:
        parts = pt.grad_parts(node)
        edits = ()
        if parts and parts[2] and self.writer is not None:
            text = self._hessians_text(*parts[:2])
            edits = (self._replace(node, text),) if text else ()
        return [self._finding(node, "CG105", "tf.hessians is graph-only and builds one "
                              "gradient per row; use "
                              f"{self._suggest(edits, '[cg.hessian(tf.reduce_sum(y), x)]')}",
                              edits)]

    def _hessians_text(self, ys: ast.expr, xs: ast.expr) -> str | None:
        """tf.hessians sums ys and returns one x.shape + x.shape block per x, no cross terms."""
        w = self.writer
        if isinstance(ys, ast.List | ast.Tuple | ast.ListComp) or (
                isinstance(ys, ast.Name) and ys.id not in self.names.tensors
                and self._bound_to_list(ys.id)):
            return None
        total = w.text(ys) if _reduce_sum_of(ys, self.names) else f"{w.tf}.reduce_sum({w.text(ys)})"
        if isinstance(xs, ast.List | ast.Tuple):
            if any(isinstance(e, ast.Starred) for e in xs.elts) or (
                    len(xs.elts) > 1 and not pt.is_pure(ys, self.names)):
                return None
            return "[" + ", ".join(w.call("hessian", total, w.text(e)) for e in xs.elts) + "]"
        if self.names.is_tensor(xs):
            return f"[{w.call('hessian', total, w.text(xs))}]"
        if not pt.is_pure(ys, self.names) or "x_" in self.names.bound:
            return None
        return f"[{w.call('hessian', total, 'x_')} for x_ in {w.tf}.nest.flatten({w.text(xs)})]"

    def _bound_to_list(self, name: str) -> bool:
        return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.List | ast.ListComp)
                   and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                   for n in self.nodes)

    # -- CG109: a gradient row per tf.while_loop iteration ----------------------------------

    def _row_loop(self, node: ast.Call) -> list[Finding]:
        if self.names.qualname(node) == "tf.while_loop":
            return self._while_loop(node)
        return self._map_helper(node)

    def _while_loop(self, node: ast.Call) -> list[Finding]:
        args = pt.call_args(node, ("cond", "body", "loop_vars"))
        body = self._function(args[1], node) if args else None
        rows = self._row_gradients(body) if body is not None else []
        if not rows:
            return []
        self.handled |= {id(g) for g in rows}
        tapes = [g.func.value.id for g in rows if self._is_tape_call(g)]
        kind = f"{tapes[0]}.gradient" if tapes else "tf.gradients"
        edits = self._while_edits(node)
        how = (", or cg.migrate.row_while_loop in place of tf.while_loop (same arguments; it "
               "computes every row at once when it can check at run time that they are what "
               "the loop writes)" if edits else " (not rewritten: the loop is not `i < n` "
               "(or tf.less(i, n)) with a body that returns (i + 1, acc.write(i, row)))")
        return [self._finding(node, "CG109", f"hand-built Jacobian: {kind} of one row per "
                              "tf.while_loop iteration, one after another; use "
                              f"cg.stacked_jacobian(y, x){how}", edits)]

    def _while_edits(self, node: ast.Call) -> tuple[Edit, ...]:
        """`tf.while_loop(lambda i, _: i < n, body, loop_vars)` with a body returning
        `(i + 1, acc.write(i, ...))`: `cg.migrate.row_while_loop(...)`, same arguments, which
        checks the rest at run time."""
        args = pt.call_args(node, ("cond", "body", "loop_vars"))
        extra = {k.arg for k in node.keywords} - {"cond", "body", "loop_vars"}
        if self.writer is None or not args or None in args or len(node.args) > 3 or (
                extra - {"parallel_iterations", "back_prop", "swap_memory", "name"}):
            return ()
        cond, body = self._function(args[0], node), self._function(args[1], node)
        count = self._bound(cond, node) if cond is not None else None
        if count is None or body is None or not _writes_rows(body):
            return ()
        return (self._replace(node.func, f"{self.writer.cg}.migrate.row_while_loop"),)

    def _bound(self, cond: ast.Lambda | ast.FunctionDef, at: ast.AST) -> ast.expr | None:
        """`n` of a condition `i < n` or `tf.less(i, n)` (`i` its first parameter, `n` pure
        and free of its parameters, in the scope of the loop): row_while_loop checks at run
        time that the condition is a `Less` op of the index, which both build."""
        operands = _less_operands(_single_expression(cond), self.names)
        params = {a.arg for a in cond.args.args}
        if operands is None or not cond.args.args or not self._same_scope(at, cond):
            return None
        index, bound = operands
        if not (isinstance(index, ast.Name) and index.id == cond.args.args[0].arg):
            return None
        pure = pt.is_pure(bound, self.names) or pt.is_pure_count(bound, self.names)
        return bound if pure and not _names_in(bound) & params else None

    def _map_helper(self, node: ast.Call) -> list[Finding]:
        """`helper(lambda e: tf.gradients(e, x)[0], elems)` where `helper` is a function of
        this module built on tf.while_loop: a Jacobian through a hand-written map."""
        helper = self._function(node.func, node) if isinstance(node.func, ast.Name) else None
        if helper is None or isinstance(helper, ast.Lambda) or not self._loops(helper):
            return []
        mapped = [self._function(a, node) for a in node.args[:1]]
        rows = (self._row_gradients(mapped[0], indexed=False)
                if mapped and mapped[0] is not None else [])
        if not rows:
            return []
        self.handled |= {id(g) for g in rows}
        loops = self._while_loops(helper, set())
        here = len(loops) == 1 and self._scope(loops[0]) is not None  # not another cell's
        edits = self._while_edits(loops[0]) if here else ()
        name = node.func.id
        fix = (f"; the fix makes the tf.while_loop of your {name} a "
               "cg.migrate.row_while_loop, which computes every row at once when the "
               "mapped function allows it" if edits else
               f" (not rewritten: {name} is your own function, and its tf.while_loop is "
               "not `i < n` (or tf.less(i, n)) with a body that returns "
               "(i + 1, acc.write(i, row)))")
        return [self._finding(node, "CG109", f"hand-built Jacobian: {name} maps a "
                              "tf.gradients row over the elements in a tf.while_loop, one "
                              f"after another; use cg.stacked_jacobian(y, x){fix}", edits)]

    def _while_loops(self, fn: ast.FunctionDef, seen: set[int]) -> list[ast.Call]:
        """The tf.while_loop calls `fn` makes, itself or through functions of this module."""
        seen.add(id(fn))
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
        found = [n for n in calls if self.names.qualname(n) == "tf.while_loop"]
        for call in calls:
            called = self._function(call.func, call) if isinstance(call.func, ast.Name) else None
            if isinstance(called, ast.FunctionDef) and id(called) not in seen:
                found += self._while_loops(called, seen)
        return found

    def _loops(self, fn: ast.FunctionDef) -> bool:
        """Whether `fn` runs a tf.while_loop, itself or through functions of this module
        (each function looked at once; a cycle of calls counts as no loop)."""
        known = self._loop_functions
        if id(fn) not in known:
            known[id(fn)] = False  # while it is being looked at
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            known[id(fn)] = any(self.names.qualname(n) == "tf.while_loop" for n in calls) or any(
                isinstance(f, ast.FunctionDef) and self._loops(f)
                for f in (self._function(n.func, n) for n in calls
                          if isinstance(n.func, ast.Name)))
        return known[id(fn)]

    @functools.cached_property
    def _loop_functions(self) -> dict[int, bool]:
        return {}

    def _row_gradients(self, fn: ast.Lambda | ast.FunctionDef,
                       indexed: bool = True) -> list[ast.Call]:
        """The gradient calls in `fn` whose target is one row: selected by one of its
        parameters (`y[i]`, `tf.gather(y, i)`, `tf.slice(y, [i], ...)`: a loop index), or,
        with `indexed` False, a parameter itself (the element a map hands over)."""
        params = scopes.references(fn, {a.arg for a in fn.args.args})
        rows = {id(n) for n in ast.walk(fn) if self._selects(n, params)} if indexed else set()
        names = _dependent_names(fn, params if not indexed else set(), rows)
        found = []
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and (self.names.qualname(n) == "tf.gradients"
                                            or self._is_tape_call(n, ("gradient",))):
                target = pt.call_args(n, ("target", "sources"))
                target = target[0] if target else None
                if target is not None and _refers(target, names | rows):
                    found.append(n)
        return found

    def _selects(self, node: ast.AST, index: set[int]) -> bool:
        """`y[i]`, `tf.gather(y, i)` or `tf.slice(y, [i], ...)` with `i` one of the names
        whose ids are in `index` (names resolved by scope: a comprehension's own `i` is
        another variable)."""
        if isinstance(node, ast.Subscript):  # an index, not a window `y[i:i + k]`
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(_refers(p, index) for p in parts if not isinstance(p, ast.Slice))
        if isinstance(node, ast.Call) and self.names.qualname(node) in (
                "tf.gather", "tf.slice", "tf.gather_nd", "tf.strided_slice"):
            return any(_refers(a, index) for a in node.args[1:])
        return False

    def _is_tape_call(self, node: ast.Call, methods=_TAPE_METHODS) -> bool:
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr in methods
                and isinstance(func.value, ast.Name) and func.value.id in self.names.tapes)

    # -- CG104 / CG110 / CG107 ---------------------------------------------------------------

    def _tape_call(self, node: ast.Call) -> list[Finding]:
        if not self._is_tape_call(node) or id(node) in self.handled:
            return []
        return self._tape_slice(node) or self._tape_loop(node)

    def _tape_loop(self, node: ast.Call) -> list[Finding]:
        if node.func.attr != "gradient":
            return []
        loop = self._enclosing_loop(node) or self._row_loop_of(node)
        if loop is None:
            return []
        what = "for loop" if isinstance(loop, ast.For) else "comprehension"
        tape = node.func.value.id
        if self._after_recording(loop, tape):
            return [self._finding(node, "CG110", f"{tape}.gradient of one row per iteration "
                                  f"of a {what}, each row sliced after {tape} stopped "
                                  f"recording (outside its `with` block): {tape} never saw "
                                  "the slice, so the result is None; use "
                                  f"{tape}.jacobian(y, x), or slice inside the `with` block "
                                  "(not rewritten: the code does not compute what it means "
                                  "to)")]
        return [self._finding(node, "CG110", f"hand-built Jacobian: {tape}.gradient of one "
                              f"row per iteration of a {what} (one backward pass each); use "
                              f"{tape}.jacobian(y, x) or cg.stacked_jacobian(y, x, "
                              f"tape={tape}) (not rewritten: the rows are collected by your "
                              "own code)")]

    def _after_recording(self, loop: ast.AST, tape: str) -> bool:
        """Whether `loop` runs after the `with` block that made `tape` (in the same scope),
        outside any `with tape:` that records again."""
        if isinstance(loop, ast.comprehension):
            loop = self.parents.get(id(loop))
        scope = self._scope(loop)
        blocks = [n for n in ast.walk(scope) if isinstance(n, ast.With | ast.AsyncWith)
                  and any(_names_tape(item, tape) for item in n.items)] if scope else []
        made = [b for b in blocks if any(isinstance(i.optional_vars, ast.Name)
                                         and i.optional_vars.id == tape for i in b.items)]
        if len(made) != 1 or made[0].end_lineno >= loop.lineno:
            return False
        return not any(id(loop) in {id(n) for n in ast.walk(b)} for b in blocks)

    def _row_loop_of(self, call: ast.Call) -> ast.For | None:
        """The for loop around `call` whose index selects the target through names the loop
        assigns (`prediction = predictions[:, i]`) while the sources stay the same."""
        args = pt.call_args(call, ("target", "sources"))
        if not args or None in args:
            return None
        node = call
        while not isinstance(node, _SCOPES):
            node = self.parents.get(id(node))
            if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)):
                continue
            index = scopes.references(node, {node.target.id})
            rows = {id(n) for n in ast.walk(node) if self._selects(n, index)}
            names = _dependent_names(node, set(), rows)
            if _refers(args[0], names) and not _refers(args[1], names | index):
                return node
        return None

    def _tape_slice(self, node: ast.Call) -> list[Finding]:
        func = node.func
        args = pt.call_args(node, ("target", "sources"))
        sources = args[1] if args else None
        items = sources.elts if isinstance(sources, ast.List | ast.Tuple) else [sources]
        sliced = [s for s in items if _tensor_slice(s)]
        if not sliced:
            return []
        text = ast.get_source_segment(self.source, sliced[0])
        return [self._finding(node, "CG104", f"{func.value.id}.{func.attr} with respect to "
                              f"{text}, a slice made after recording: the result is None; "
                              "differentiate with respect to the whole tensor and slice the "
                              "result, or use cg.per_element_gradients / cg.batch_jacobian")]

    def _private_call(self, node: ast.Call, name: str) -> list[Finding]:
        """A call through a private module: `pfor_gradients.jacobian(y, x)`."""
        function = name.rpartition(".")[2]
        advice = _PRIVATE_REPLACEMENTS.get(function, "the public compat_grads functions")
        text = ast.get_source_segment(self.source, node.func)
        return [self._finding(node, "CG107", f"call through TensorFlow's private API "
                              f"({text}): it changes without notice; use {advice}")]

    def _private_import(self, node: ast.Import | ast.ImportFrom) -> list[Finding]:
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [f"{node.module}.{a.name}" for a in node.names] if node.module else [])
        hits = [m for m in modules if m.startswith(_PRIVATE)]
        if not hits:
            return []
        why = (" (its jacobian returns None in eager mode)"
               if hits[0].startswith("tensorflow.python.ops.parallel_for.gradients")
               else "")
        return [self._finding(node, "CG107", f"private TensorFlow API {hits[0]}: it changes "
                              f"without notice{why}; use cg.stacked_jacobian / "
                              "cg.batch_jacobian / cg.hessian")]


def _list_init(stmt: ast.stmt) -> str | None:
    """`L` of `L = []`."""
    ok = (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
          and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.List)
          and not stmt.value.elts)
    return stmt.targets[0].id if ok else None


def _names_tape(item: ast.withitem, tape: str) -> bool:
    """`with ... as tape` or `with tape:`."""
    bound = isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == tape
    return bound or (isinstance(item.context_expr, ast.Name) and item.context_expr.id == tape)


def _less_operands(test: ast.expr | None, names: Names) -> tuple[ast.expr, ast.expr] | None:
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


def _is_zero(index: ast.expr) -> bool:
    return isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0


def _axis_zero(axis: ast.expr | None) -> bool:
    return axis is None or (isinstance(axis, ast.Constant) and axis.value == 0)


def _expand_dims_zero(node: ast.expr, names: Names) -> ast.expr | None:
    """`g` of `tf.expand_dims(g, 0)` / `tf.expand_dims(g, axis=0)`."""
    if not (isinstance(node, ast.Call) and names.qualname(node) == "tf.expand_dims"):
        return None
    args = pt.call_args(node, ("input", "axis"))
    ok = args and args[0] is not None and args[1] is not None and _axis_zero(args[1])
    return args[0] if ok and {k.arg for k in node.keywords} <= {"input", "axis"} else None


def _reduce_sum_of(node: ast.expr, names: Names) -> ast.expr | None:
    """`g` of `tf.reduce_sum(g)` (over every axis)."""
    ok = (isinstance(node, ast.Call) and names.qualname(node) == "tf.reduce_sum"
          and len(node.args) == 1 and not node.keywords)
    return node.args[0] if ok else None


def _single_expression(fn: ast.Lambda | ast.FunctionDef) -> ast.expr | None:
    """The expression a lambda or a one-statement `return` function computes."""
    if isinstance(fn, ast.Lambda):
        return fn.body
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    ok = len(body) == 1 and isinstance(body[0], ast.Return) and not fn.decorator_list
    return body[0].value if ok else None


def _dependent_names(fn: ast.AST, names: set[int], nodes: set[int] = frozenset()) -> set[int]:
    """The ids of the names in `names` (ids of `ast.Name` nodes) and of those that mean a
    name `fn` assigns from them or from the nodes with ids in `nodes` (`yi = y[i]`),
    transitively."""
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)]
    found = set(names)
    for _ in range(3):  # chains of a few assignments reach a fixed point
        assigned = {t.id for a in assigns if _refers(a.value, found | nodes)
                    for target in a.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        found = set(names) | scopes.references(fn, assigned)
    return found


def _refers(node: ast.AST, ids: set[int]) -> bool:
    """Whether `node` is or holds a node whose id is in `ids`."""
    return any(id(n) in ids for n in ast.walk(node))


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _row_axis(target: ast.expr, var: str) -> int | None:
    """0 for `y[var]`, 1 for `y[:, var]`, else None."""
    if not isinstance(target, ast.Subscript):
        return None
    index = target.slice
    if isinstance(index, ast.Name) and index.id == var:
        return 0
    return 1 if _column(target) and isinstance(index.elts[1], ast.Name) and (
        index.elts[1].id == var) else None


def _column(node: ast.expr) -> bool:
    """`y[:, i]`: a whole first axis, then one index."""
    elts = node.slice.elts if isinstance(node, ast.Subscript) and isinstance(
        node.slice, ast.Tuple) else []
    return (len(elts) == 2 and isinstance(elts[0], ast.Slice) and elts[0].lower is None
            and elts[0].upper is None and elts[0].step is None
            and not isinstance(elts[1], ast.Slice))


def _tensor_slice(node: ast.expr | None) -> bool:
    """`x[:, k]`-like multi-axis indexing, which only a tensor accepts (a list would not)."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
        return False
    return any(isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and e.value in (
        Ellipsis, None)) for e in node.slice.elts)
