"""The shared walk of one parsed module, which every rule reads: its nodes and their
parents, positions as people count them, the scope of a node (a function, a class or the
module; a comprehension's own names are resolved by `scopes`), the loops and functions a
name or a node stands in, and the findings made from them."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rowloops, scopes
from compat_grads.migrate.findings import Edit, Finding
from compat_grads.migrate.names import Names

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
TAPE_METHODS = ("gradient", "jacobian", "batch_jacobian")
# The line ends of the Python tokenizer (str.splitlines also splits on \f, \v, \x1c-\x1e,
# \x85, \u2028 and \u2029, which would shift every line and column after them).
_LINE_END = re.compile(r"\r\n|\r|\n")


class Context:
    """One module as the rules see it.

    Args:
      tree: the parsed module.
      source: its text.
      names: what its names (and those of the other cells of its notebook) stand for.

    Attributes:
      nodes: every node of `tree`, in `ast.walk` order.
      parents: the parent of each node, by `id`.
      handled: ids of the gradient calls a rule already reported (as part of a larger form).
      imports: the imports a rewrite needs (`import compat_grads as cg`, ...).
      writer: builds rewrite text; None when no name is free for TensorFlow.
    """

    def __init__(self, tree: ast.Module, source: str, names: Names):
        self.tree, self.source, self.names = tree, source, names
        self.lines = _LINE_END.split(source)
        self.nodes = list(ast.walk(tree))
        self.parents = {id(c): p for p in self.nodes for c in ast.iter_child_nodes(p)}
        self.handled: set[int] = set()
        self._memo: dict[str, object] = {}
        tf, self.imports = names.prefix("tf"), []
        if tf is None and "tf" not in names.bound:
            tf, self.imports = "tf", ["import tensorflow as tf"]
        cg = names.prefix("compat_grads")
        if cg is None:
            cg = "cg" if "cg" not in names.bound else "compat_grads"
            self.imports.append("import compat_grads" + (" as cg" if cg == "cg" else ""))
        self.writer = pt.Writer(source, names, tf, cg) if tf else None

    def memo(self, key: str, compute: Callable[[], object]):
        """`compute()`, computed once per module under `key`."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # -- positions and findings ------------------------------------------------------------

    def pos(self, line: int, byte_col: int) -> tuple[int, int]:
        """ast columns count UTF-8 bytes; LibCST and people count characters."""
        return line, len(self.lines[line - 1].encode()[:byte_col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
        """Where `node` starts and ends, in characters."""
        return (self.pos(node.lineno, node.col_offset),
                self.pos(node.end_lineno, node.end_col_offset))

    def finding(self, node: ast.AST, code: str, message: str,
                edits: tuple[Edit, ...] = ()) -> Finding:
        """A finding at `node`; with edits, it carries the imports they need."""
        line, col = self.pos(node.lineno, node.col_offset)
        return Finding(line, col + 1, code, message, edits, tuple(self.imports) if edits else ())

    def replace(self, node: ast.AST, text: str) -> Edit:
        """The edit replacing `node` by `text`."""
        return Edit(*self.span(node), text)

    def delete(self, stmt: ast.stmt) -> Edit:
        """The edit deleting the statement `stmt`."""
        return Edit(*self.span(stmt), None)

    # -- where a node is -------------------------------------------------------------------

    def scope(self, node: ast.AST) -> ast.AST | None:
        """The function, class or module around `node`; None for a node of another tree
        (a notebook's functions are shared by all its cells)."""
        node = self.parents.get(id(node))
        while node is not None and not isinstance(node, SCOPES):
            node = self.parents.get(id(node))
        return node

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        """The statement that holds `node`."""
        while node is not None and not isinstance(node, ast.stmt):
            node = self.parents.get(id(node))
        return node

    def block_of(self, stmt: ast.stmt) -> list[ast.stmt]:
        """The list of statements `stmt` is one of ([] when it is none)."""
        parent = self.parents.get(id(stmt))
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block
        return []

    def only_uses(self, name: str, count: int, inside: ast.AST) -> bool:
        """Whether the variable `name` of the scope around `inside` occurs exactly `count`
        times (a nested scope's own `name` is another variable)."""
        return len(scopes.references(self.scope(inside), {name})) == count

    def same_scope(self, node: ast.AST, fn: ast.AST) -> bool:
        """A named function must be defined in the scope of the call (same closure names)."""
        if isinstance(fn, ast.Lambda):
            return True
        return self.scope(node) is self.scope(fn)

    def function(self, fn: ast.expr | None,
                 at: ast.AST | None = None) -> ast.Lambda | ast.FunctionDef | None:
        """The lambda, or the one definition of the named function (the one in the scope of
        `at` when several functions have that name)."""
        if isinstance(fn, ast.Lambda):
            return fn
        defs = self.names.functions.get(fn.id, []) if isinstance(fn, ast.Name) else []
        if len(defs) > 1 and at is not None:
            defs = [d for d in defs if self.scope(d) is self.scope(at)]
        return defs[0] if len(defs) == 1 else None

    # -- what a call is --------------------------------------------------------------------

    def is_gradients(self, node: ast.AST) -> bool:
        """Whether `node` is a `tf.gradients` call."""
        return isinstance(node, ast.Call) and self.names.qualname(node) == "tf.gradients"

    def gradients_in(self, root: ast.AST) -> list[ast.Call]:
        """The `tf.gradients` calls under `root`."""
        return [n for n in ast.walk(root) if self.is_gradients(n)]

    def is_tape_call(self, node: ast.Call, methods: tuple[str, ...] = TAPE_METHODS) -> bool:
        """Whether `node` is `tape.<method>(...)` of a name bound to a GradientTape."""
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr in methods
                and isinstance(func.value, ast.Name) and func.value.id in self.names.tapes)

    def selects(self, node: ast.AST, index: set[int]) -> bool:
        """`y[i]`, `tf.gather(y, i)` or `tf.slice(y, [i], ...)` with `i` one of the names
        whose ids are in `index` (names resolved by scope: a comprehension's own `i` is
        another variable)."""
        if isinstance(node, ast.Subscript):  # an index, not a window `y[i:i + k]`
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return any(refers(p, index) for p in parts if not isinstance(p, ast.Slice))
        if isinstance(node, ast.Call) and self.names.qualname(node) in (
                "tf.gather", "tf.slice", "tf.gather_nd", "tf.strided_slice"):
            return any(refers(a, index) for a in node.args[1:])
        return False

    # -- row loops -------------------------------------------------------------------------

    def loop_of(self, loop: ast.For | ast.comprehension) -> rowloops.Loop | None:
        """The loop as the rewrite reads it (see `rowloops.loop_of`), looked at once."""
        seen = self.memo("loops", dict)
        if id(loop) not in seen:
            comp = self.parents.get(id(loop)) if isinstance(loop, ast.comprehension) else None
            first = comp is None or comp.generators[0] is loop  # evaluated outside
            stmt = self.statement_of(loop)
            seen[id(loop)] = rowloops.loop_of(
                loop.target, loop.iter, comp or self.scope(loop),
                self.scope(loop) if first else None, self.block_of(stmt), stmt, self.names)
        return seen[id(loop)]

    def visits(self, target: ast.expr, loop: ast.For | ast.comprehension) -> bool:
        """Whether the loop's variable indexes `target` (or is it, over `tf.unstack(y)`)."""
        shape = self.loop_of(loop)
        var, iterable = shape.var, shape.iterable
        if isinstance(target, ast.Name):
            return target.id == var and (rowloops.is_unstack(iterable, self.names)
                                         or self.names.is_tensor(iterable))
        if pt.gathered(target, var, self.names) is not None:
            return True
        return isinstance(target, ast.Subscript) and any(
            isinstance(n, ast.Name) and n.id == var for n in ast.walk(target.slice))

    def enclosing_loop(self, call: ast.Call) -> ast.For | ast.comprehension | None:
        """The for loop or comprehension whose variable indexes the target `y[i]` / `y[:, i]`
        (or is the target, iterating over `tf.unstack(y)`)."""
        parts = pt.grad_parts(call)
        node = call
        while parts and not isinstance(node, SCOPES):
            node = self.parents.get(id(node))
            loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
            for loop in loops:
                if self.loop_of(loop) is not None and self.visits(parts[0], loop):
                    return loop
        return None


def refers(node: ast.AST, ids: set[int]) -> bool:
    """Whether `node` is or holds a node whose id is in `ids`."""
    return any(id(n) in ids for n in ast.walk(node))


def names_in(node: ast.AST) -> set[str]:
    """The identifiers of the names in `node`."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def dependent_names(fn: ast.AST, names: set[int], nodes: set[int] = frozenset()) -> set[int]:
    """The ids of the names in `names` (ids of `ast.Name` nodes) and of those that mean a
    name `fn` assigns from them or from the nodes with ids in `nodes` (`yi = y[i]`),
    transitively."""
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign)]
    found = set(names)
    for _ in range(3):  # chains of a few assignments reach a fixed point
        assigned = {t.id for a in assigns if refers(a.value, found | nodes)
                    for target in a.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        found = set(names) | scopes.references(fn, assigned)
    return found


def single_expression(fn: ast.Lambda | ast.FunctionDef) -> ast.expr | None:
    """The expression a lambda or a one-statement `return` function computes."""
    if isinstance(fn, ast.Lambda):
        return fn.body
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    ok = len(body) == 1 and isinstance(body[0], ast.Return) and not fn.decorator_list
    return body[0].value if ok else None


def is_zero(index: ast.expr) -> bool:
    """Whether `index` is the literal int 0."""
    return isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0


def axis_zero(axis: ast.expr | None) -> bool:
    """Whether `axis` is absent or the literal 0."""
    return axis is None or (isinstance(axis, ast.Constant) and axis.value == 0)


def expand_dims_zero(node: ast.expr, names: Names) -> ast.expr | None:
    """`g` of `tf.expand_dims(g, 0)` / `tf.expand_dims(g, axis=0)`."""
    if not (isinstance(node, ast.Call) and names.qualname(node) == "tf.expand_dims"):
        return None
    args = pt.call_args(node, ("input", "axis"))
    ok = args and args[0] is not None and args[1] is not None and axis_zero(args[1])
    return args[0] if ok and {k.arg for k in node.keywords} <= {"input", "axis"} else None


def reshape_flat(node: ast.expr, names: Names) -> ast.expr | None:
    """`g` of `tf.reshape(g, [-1])` / `tf.reshape(g, shape=[-1])` (a row flattened)."""
    if not (isinstance(node, ast.Call) and names.qualname(node) == "tf.reshape"):
        return None
    args = pt.call_args(node, ("tensor", "shape"))
    shape = args[1] if args else None
    flat = (isinstance(shape, ast.List | ast.Tuple) and len(shape.elts) == 1
            and ast.dump(shape.elts[0]) == ast.dump(ast.parse("-1", mode="eval").body))
    ok = flat and args[0] is not None and {k.arg for k in node.keywords} <= {"tensor", "shape"}
    return args[0] if ok else None


def reduce_sum_of(node: ast.expr, names: Names) -> ast.expr | None:
    """`g` of `tf.reduce_sum(g)` (over every axis)."""
    ok = (isinstance(node, ast.Call) and names.qualname(node) == "tf.reduce_sum"
          and len(node.args) == 1 and not node.keywords)
    return node.args[0] if ok else None


def column(node: ast.expr) -> bool:
    """`y[:, i]`: a whole first axis, then one index."""
    elts = node.slice.elts if isinstance(node, ast.Subscript) and isinstance(
        node.slice, ast.Tuple) else []
    return (len(elts) == 2 and isinstance(elts[0], ast.Slice) and elts[0].lower is None
            and elts[0].upper is None and elts[0].step is None
            and not isinstance(elts[1], ast.Slice))
