"""Ops of a kind, found among graph ops or inside the functions those ops call: a nested
`tf.function`, the branches of a `tf.cond`, the body of a `tf.while_loop` are functions of
their own, and the op that calls one shows only its name.

- Ops that run Python code (`tf.py_function`): TensorFlow takes a `tf.py_function`'s
  gradient once per run of its forward pass (the gradient pops the tape that run stashed)
  and has no second derivative through it (the gradient runs in Python, where no tape
  records it).
- A loop differentiated where it runs (`differentiated_loop`): a `While` op whose gradient
  is among the same ops. pfor cannot vectorize that: the gradient's loop reads the forward
  loop's accumulated intermediates (TensorList variants) and pfor converts neither their
  zeros nor their slices, after converting the forward loop, which is most of the time a
  failed attempt takes (3.9 of 5.3 s for a Keras LSTM's per-example gradients).
"""

from __future__ import annotations

PYTHON_OP_TYPES = frozenset({"EagerPyFunc"})
LOOP_OP_TYPES = frozenset({"While", "StatelessWhile"})


def python_op(ops) -> str | None:
    """`the EagerPyFunc op 'a'` (or `... inside the function 'f' that the op 'b' calls`)
    for the first of `ops` that runs a tf.py_function, directly or through the functions it
    calls; None when none does."""
    return _first(ops, PYTHON_OP_TYPES, set())


def loop_inside(ops) -> str | None:
    """`the While op 'a' inside the function 'f' that the op 'b' calls` (or `the While op
    'a'`) for the first of `ops` that runs a loop; None when none does."""
    return _first(ops, LOOP_OP_TYPES, set())


def differentiated_loop(ops) -> str | None:
    """`the While op 'a'` (or `... inside the function 'f' that the op 'b' calls`) for the
    first of `ops` that runs a loop and gives a variant to another of `ops` that runs a loop
    too (what a loop's gradient reads of its forward run: the intermediates it accumulated);
    None when none does. A variant that goes only to ops outside `ops` (the gradient of a
    loop run once, outside the rows) or to ops that run no loop (a TensorArray stacked)
    does not count."""
    inside = set(ops)

    def runs_loop(op):
        return loop_inside([op]) is not None

    feeding = [op for op in ops if any(
        out.dtype.name == "variant" and any(user in inside and runs_loop(user)
                                            for user in out.consumers())
        for out in op.outputs)]
    return loop_inside(feeding)


def _first(ops, types, seen):
    for op in ops:
        if op.type in types:
            return f"the {op.type} op '{op.name}'"
        for name in _called(op.node_def):
            inside = _node_of(op.graph, name, types, seen)
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


def _node_of(graph, name, types, seen):
    """The first NodeDef of one of `types` in function `name` or the functions it calls."""
    if name in seen:
        return None
    seen.add(name)
    definition = _definition(graph, name)
    if definition is None:
        return None
    for node in definition.node_def:
        if node.op in types:
            return node
    for node in definition.node_def:
        for inner in _called(node):
            found = _node_of(graph, inner, types, seen)
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
