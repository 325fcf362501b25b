"""Python 3 scopes for the shared walk: which binding a name means.

A function, a lambda, a class body and a comprehension each have their own scope: a name they
bind again (a parameter, an assignment, a comprehension variable) is another variable inside
them. Default values, decorators, class bases and a comprehension's first iterable run in the
enclosing scope, and the functions nested in a class body do not see the class's names."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
SCOPES = (*_FUNCTIONS, *_COMPREHENSIONS, ast.ClassDef)


def references(root: ast.AST, names: set[str]) -> set[int]:
    """The ids of the `ast.Name` nodes under `root` that mean one of `names` as bound where
    `root` is: in a function or lambda root, its parameters and locals; in any other node,
    the variables of the scope it is in. Nested scopes binding a name again hide it."""
    start, found = frozenset(names), set()
    if isinstance(root, SCOPES):
        todo = [(c, start, start if not isinstance(root, ast.ClassDef) else frozenset())
                for c, inside in _parts(root) if inside]
    else:
        todo = [(c, start, start) for c in ast.iter_child_nodes(root)]
    while todo:
        node, visible, nested = todo.pop()
        if isinstance(node, ast.Name) and node.id in visible:
            found.add(id(node))
        todo += [part for part in _visible_parts(node, visible, nested) if part[1] or part[2]]
    return found


def bindings(scope: ast.AST) -> Counter:
    """How many times `scope` (a function, lambda, class, comprehension or module) binds each
    name itself: parameters, assignment and loop targets, `del`, defs, imports, handlers."""
    if isinstance(scope, _COMPREHENSIONS):
        return Counter(n.id for g in scope.generators for n in ast.walk(g.target)
                       if isinstance(n, ast.Name))
    found = Counter(_parameters(scope.args)) if isinstance(scope, _FUNCTIONS) else Counter()
    for node in _direct(scope):
        found.update(_bound_by(node))
    return found


def assigned_value(scope: ast.AST, name: str) -> ast.expr | None:
    """The value of `name = value` when that plain assignment is `scope`'s only binding of
    `name` (so the name means that value wherever `scope` reads it)."""
    if bindings(scope)[name] != 1:
        return None
    assigns = [n for n in _direct(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
    return assigns[0].value if assigns else None


def binders(scope: ast.AST, name: str) -> list[ast.AST]:
    """The nodes by which `scope` itself binds `name` (`bindings` counts them; parameters,
    read from the signature, are not among them)."""
    return [node for node in _direct(scope) if name in _bound_by(node)]


def _local_names(scope: ast.AST) -> set[str]:
    declared = {n for node in _direct(scope) if isinstance(node, ast.Global | ast.Nonlocal)
                for n in node.names} if not isinstance(scope, _COMPREHENSIONS) else set()
    return set(bindings(scope)) - declared


def _visible_parts(node: ast.AST, visible: frozenset, nested: frozenset) -> list[tuple]:
    """(child, names it sees, names a function nested in it starts from): a class body's
    own names are hidden from the functions defined in it."""
    if not isinstance(node, SCOPES):
        return [(c, visible, nested) for c in ast.iter_child_nodes(node)]
    inner = nested - _local_names(node)
    if isinstance(node, ast.ClassDef):
        inner_visible = visible - _local_names(node)
        return [(c, inner_visible, nested) if inside else (c, visible, nested)
                for c, inside in _parts(node)]
    return [(c, inner, inner) if inside else (c, visible, nested) for c, inside in _parts(node)]


def _parts(node: ast.AST) -> list[tuple[ast.AST, bool]]:
    """The children of a scope, each with whether it runs inside that scope (parameters are
    not children: `bindings` reads them from the signature)."""
    if isinstance(node, _COMPREHENSIONS):
        first = node.generators[0].iter
        inner = [c for g in node.generators for c in (g.target, g.iter, *g.ifs)]
        inner += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return [(c, c is not first) for c in inner]
    if isinstance(node, ast.ClassDef):
        return [(c, c in node.body) for c in ast.iter_child_nodes(node)]
    outside = [*node.args.defaults, *filter(None, node.args.kw_defaults)]
    if isinstance(node, ast.Lambda):
        return [(c, False) for c in outside] + [(node.body, True)]
    annotations = [a.annotation for a in _arguments(node.args) if a.annotation]
    outside += [*node.decorator_list, *annotations, *filter(None, [node.returns])]
    return [(c, False) for c in outside] + [(s, True) for s in node.body]


def _direct(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes that run in `scope` itself, with the nested scopes (whose names, defaults
    and decorators run here) but not what runs inside them."""
    todo = ([c for c, inside in _parts(scope) if inside] if isinstance(scope, SCOPES)
            else list(ast.iter_child_nodes(scope)))
    while todo:
        node = todo.pop()
        yield node
        todo += ([c for c, inside in _parts(node) if not inside] if isinstance(node, SCOPES)
                 else list(ast.iter_child_nodes(node)))


def _arguments(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *filter(None, [args.vararg]), *args.kwonlyargs,
            *filter(None, [args.kwarg])]


def _parameters(args: ast.arguments) -> list[str]:
    return [a.arg for a in _arguments(args)]


def _bound_by(node: ast.AST) -> list[str]:
    """The names one node binds in the scope it runs in."""
    if isinstance(node, ast.Name):
        return [node.id] if isinstance(node.ctx, ast.Store | ast.Del) else []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [a.asname or a.name.partition(".")[0] for a in node.names if a.name != "*"]
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        return [node.name] if node.name else []
    return [node.rest] if isinstance(node, ast.MatchMapping) and node.rest else []
