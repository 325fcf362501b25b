"""Ops that run Python code (`tf.py_function`), found among graph ops or inside the
functions those ops call: a nested `tf.function`, the branches of a `tf.cond`, the body of a
`tf.while_loop` are functions of their own, and the op that calls one shows only its name.

TensorFlow takes a `tf.py_function`'s gradient once per run of its forward pass (the
gradient pops the tape that run stashed) and has no second derivative through it (the
gradient runs in Python, where no tape records it).
"""

from __future__ import annotations

PYTHON_OP_TYPES = frozenset({"EagerPyFunc"})


def python_op(ops) -> str | None:
    """`the EagerPyFunc op 'a'` (or `... inside the function 'f' that the op 'b' calls`)
    for the first of `ops` that runs a tf.py_function, directly or through the functions it
    calls; None when none does."""
    seen = set()
    for op in ops:
        if op.type in PYTHON_OP_TYPES:
            return f"the {op.type} op '{op.name}'"
        for name in _called(op.node_def):
            inside = _python_node(op.graph, name, seen)
            if inside is not None:
                return (f"the {inside.op} op '{inside.name}' inside the function '{name}' "
                        f"that the {op.type} op '{op.name}' calls")
    return None


def _called(node_def):
    """The names of the functions a node calls (its function-valued attributes)."""
    for value in node_def.attr.values():
        kind = value.WhichOneof("value")
        if kind == "func":
            yield value.func.name
        elif kind == "list":
            yield from (func.name for func in value.list.func)


def _python_node(graph, name, seen):
    """The first NodeDef that runs Python in function `name` or the functions it calls."""
    if name in seen:
        return None
    seen.add(name)
    definition = _definition(graph, name)
    if definition is None:
        return None
    for node in definition.node_def:
        if node.op in PYTHON_OP_TYPES:
            return node
    for node in definition.node_def:
        for inner in _called(node):
            found = _python_node(graph, inner, seen)
            if found is not None:
                return found
    return None


def _definition(graph, name):
    """Function `name`'s FunctionDef, from `graph` or the graphs it is nested in."""
    while graph is not None:
        function = graph._get_function(name)
        if function is not None:
            return getattr(function, "definition", None)
        graph = getattr(graph, "outer_graph", None)
    return None
