"""What a row loop runs over, and what its row is taken from.

Besides `for yi in tf.unstack(y)` written inline, real programs unstack into a name first
(TensorFlow 1.0's own `hessians` did: `grads = tf.unstack(grads)`, then one gradient per
element), run under `enumerate`, or take the row with `tf.gather(y, i)`. The rewrite reads
each of them as the inline form, and only where that is provably what the loop runs over."""

from __future__ import annotations

import ast
import dataclasses

from compat_grads.migrate import scopes
from compat_grads.migrate.names import Names
from compat_grads.migrate.patterns import gathered


@dataclasses.dataclass(frozen=True)
class Loop:
    """`for var in iterable` as the rewrite reads it: a name bound to `tf.unstack(...)` is
    replaced by that call, `enumerate(it)` by `it`; `why` says why the loop may not be read
    so ("" when it may)."""

    var: str
    iterable: ast.expr
    why: str = ""


def loop_of(target: ast.expr, iterable: ast.expr, var_scope: ast.AST, iter_scope: ast.AST | None,
            block: list[ast.stmt], stmt: ast.stmt | None, names: Names) -> Loop | None:
    """The loop `for target in iterable`, or None when its target is not one name (or `k, v`
    over `enumerate`). `var_scope` binds the loop variables; `iter_scope` (None: do not look
    names up) evaluates the iterable, in `stmt` of `block`."""
    why = ""
    if _enumerated(target, iterable, names):
        index, target, iterable = target.elts[0].id, target.elts[1], iterable.args[0]
        if len(scopes.references(var_scope, {index})) != 1:
            why = f"the loop also uses the index {index} of enumerate(...)"
    if not isinstance(target, ast.Name):
        return None
    if isinstance(iterable, ast.Name) and iter_scope is not None:
        call, unbound = _unstacked(iterable.id, iter_scope, block, stmt, names)
        if call is not None:
            iterable, why = call, why or unbound
    return Loop(target.id, iterable, why)


def is_unstack(node: ast.expr, names: Names) -> bool:
    return isinstance(node, ast.Call) and names.qualname(node) == "tf.unstack"


def wrapper(call: ast.Call, parents: dict[int, ast.AST], names: Names) -> str | None:
    """The function each row `tf.gradients(...)[k]` goes through before it is collected
    (`tf.reshape`, ...), or None; `tf.expand_dims(g, 0)` and `L.append(g)` do not count."""
    node, parent = call, parents.get(id(call))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        node, parent = parent, parents.get(id(parent))
    if not (isinstance(parent, ast.Call) and node in parent.args):
        return None
    func = parent.func
    if isinstance(func, ast.Attribute) and func.attr == "append":
        return None
    axis = parent.args[1] if len(parent.args) > 1 else None
    if names.qualname(parent) == "tf.expand_dims" and isinstance(axis, ast.Constant) and (
            axis.value == 0):
        return None
    return names.qualname(parent) or ast.unparse(func)


def _enumerated(target: ast.expr, iterable: ast.expr, names: Names) -> bool:
    """`k, v` over the builtin `enumerate(it)` (no start)."""
    return (isinstance(target, ast.Tuple) and len(target.elts) == 2
            and all(isinstance(e, ast.Name) for e in target.elts)
            and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)
            and iterable.func.id == "enumerate" and "enumerate" not in names.bound
            and len(iterable.args) == 1 and not iterable.keywords)


def _unstacked(name: str, scope: ast.AST, block: list[ast.stmt], stmt: ast.stmt | None,
               names: Names) -> tuple[ast.Call | None, str]:
    """(the `tf.unstack(...)` the name `name` stands for, "") when the scope binds it once,
    in a statement of `block` before `stmt`, and nothing in between binds it or a name of
    the unstacked expression again; (a `tf.unstack(...)` bound to it, why it may not be the
    one) when it is bound so otherwise; (None, "") when it is never bound to one."""
    value = scopes.assigned_value(scope, name)
    if not is_unstack(value, names):
        others = [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign)
                  and _binds(n, name) and is_unstack(n.value, names)]
        return ((others[-1], f"{name} is bound more than once in this scope, so it may not "
                 "be the tf.unstack(...) the loop runs over") if others else (None, ""))
    at = [i for i, s in enumerate(block) if _binds(s, name) and s.value is value]
    end = next((i for i, s in enumerate(block) if s is stmt), None)
    if not at or end is None or at[0] > end:
        return value, f"{name} = tf.unstack(...) is not a statement before the loop in its block"
    operands = {name} | {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if any(operands & _stored(s) for s in block[at[0] + 1:end]):
        return value, f"{name} or a name of the tf.unstack(...) is bound again before the loop"
    return value, ""


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether `stmt` is `name = value`."""
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name)


def _stored(stmt: ast.stmt) -> set[str]:
    found = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store | ast.Del)}
    return found | {n.name for n in ast.walk(stmt)
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def array_of(target: ast.expr, var: str, names: Names) -> ast.expr | None:
    """`y` of a row `y[...]` or `tf.gather(y, var)`; None for an element of `tf.unstack(y)`
    (whose `y` is evaluated once, with the loop's iterable)."""
    return target.value if isinstance(target, ast.Subscript) else gathered(target, var, names)
