"""The rules of the house (docs: CONTRIBUTING.md), checked on the source tree: no import cycle
inside compat_grads, no module over 500 lines, no test file over 600, the mode asked only in
`_src/core/mode.py`, and each public function in api.py one call into the call path."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "compat_grads"
MODULE_LINES = 500
TEST_FILE_LINES = 600
API_BODY_LINES = 8


def _modules():
    """{dotted name: path} of every module of compat_grads."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name, path):
    """The compat_grads modules `name` imports, at its top and inside its functions alike."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` imports the module (a package's __init__ runs
            # before any of its modules, so it is not counted as imported by them)
            imported.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES
                            else base for alias in node.names)
    return {_owner(target) for target in imported if _owner(target) not in (None, name)}


def _owner(dotted):
    """The module of compat_grads that `dotted` names (a module, or a name in one)."""
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def _cycle(graph):
    """One import cycle of `graph` as a list of modules, or None."""
    state = {}
    for start in graph:
        if start in state:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        state[start] = "open"
        path = [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = "done"
                stack.pop()
                path.pop()
            elif state.get(child) == "open":
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = "open"
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
    return None


def test_no_import_cycle_inside_the_package():
    # The package's __init__ is its facade (lazy exports of every public name): it may name
    # any module, and no module imports it.
    graph = {name: _imported(name, path) - {"compat_grads"}
             for name, path in MODULES.items() if name != "compat_grads"}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


LAYERS = ("core", "memory", "console", "stacking", "jacobians", "traces", "dp", "backends",
          "curvature", "call", "api")
"""The folders of compat_grads/_src from the bottom up (`_src/memory.py` is a layer of one
module): each imports only itself and the layers below it (CONTRIBUTING.md's house map)."""
LONGEST_CHAIN = 9
TOOLS = ("compat_grads.testing", "compat_grads.bench", "compat_grads.migrate")
"""Built on the library, not part of its layers: they may import any of it."""


def _layer(name):
    """The layer of a module of compat_grads/_src (None above _src: the faces and tools)."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "_src" else None


def test_the_folders_of_src_import_in_layers():
    wrong = set()
    for name, path in MODULES.items():
        layer = _layer(name)
        if layer is None:
            continue
        for imported in _imported(name, path):
            below = _layer(imported)
            if below is None or LAYERS.index(below) > LAYERS.index(layer):
                wrong.add(f"{name} -> {imported}")
    assert not wrong, sorted(wrong)
    assert {_layer(name) for name in MODULES} - {None} <= set(LAYERS)


def _library_graph():
    """The import graph of the library: the faces and _src, without the package facade and
    the tools built on it."""
    return {name: {i for i in _imported(name, path) if not i.startswith(TOOLS)} - {
        "compat_grads"} for name, path in MODULES.items()
        if name != "compat_grads" and not name.startswith(TOOLS)}


def _longest_chain(graph):
    """The longest chain of imports in an acyclic `graph`, as a list of modules."""
    found = {}

    def longest(node):
        if node not in found:
            found[node] = [node] + max((longest(child) for child in graph.get(node, ())),
                                       key=len, default=[])
        return found[node]
    return max((longest(node) for node in graph), key=len)


def test_the_longest_import_chain_is_short():
    """Following an import from the public face down to TensorFlow crosses at most
    LONGEST_CHAIN modules (15 before the house was sorted by job)."""
    chain = _longest_chain(_library_graph())
    assert len(chain) <= LONGEST_CHAIN, " -> ".join(chain)


def test_the_chain_finder_finds_the_longest():
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": set(), "d": set()}
    assert _longest_chain(graph) == ["a", "b", "c"]


@pytest.mark.parametrize("limit, paths", [
    (MODULE_LINES, sorted(PACKAGE.rglob("*.py"))),
    (TEST_FILE_LINES, sorted([*ROOT.glob("tests_tf1/*.py"), *ROOT.glob("tests_tf2/*.py")])),
], ids=["modules", "test_files"])
def test_no_file_is_over_its_size(limit, paths):
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in paths}
    assert sizes and not {p: n for p, n in sizes.items() if n > limit}


def test_no_private_module_at_the_top_of_the_package():
    """Private code lives in compat_grads/_src/<job>/ (JAX's and optax's layout); the top
    holds the faces users import, the command line and the tools."""
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith(("__", "."))}
    assert {name for name in top if name.startswith("_")} == {"_src"}, top


def test_only_the_mode_module_asks_the_mode():
    askers = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                    node.func, "id", None)
                if called == "execution_mode":
                    askers.add(name)
    assert askers == {"compat_grads._src.core.mode"}


API_MODULES = ("_src/api/first_order.py", "_src/api/second_order.py", "_src/api/traces.py",
               "_src/api/dp.py", "_src/api/curvature.py", "_src/api/kernels.py")
"""The public functions' modules, a family each, which `compat_grads.api` gathers."""


def _public_functions():
    return [node for module in API_MODULES
            for node in ast.parse((PACKAGE / module).read_text()).body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


def test_api_exports_every_public_function():
    import compat_grads.api as api

    assert sorted(api.__all__) == sorted(node.name for node in _public_functions())
    assert all(callable(getattr(api, name)) for name in api.__all__)


def test_api_has_only_public_functions_each_a_short_body():
    functions = _public_functions()
    assert len(functions) >= 9
    long = {}
    for node in functions:
        body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
        lines = body[-1].end_lineno - body[0].lineno + 1
        if lines > API_BODY_LINES:
            long[node.name] = lines
    assert not long


def test_every_public_docstring_names_every_argument_in_full():
    # the shared paragraphs (compat_grads._src.api.docs) are filled in at import: help() shows them
    import inspect
    import re

    import compat_grads as cg

    for node in _public_functions():
        function = getattr(cg, node.name)
        doc = function.__doc__
        assert not re.findall(r"\{\w+\}", doc), node.name
        for name in inspect.signature(function).parameters:
            assert re.search(rf"^\s+{name}: \S", doc, re.M), (node.name, name)


def test_a_public_function_without_autographs_wrapper_is_one_call_of_the_call_path():
    """`_docs.public_call` leaves AutoGraph's wrapper off: the call path hides what it builds
    from AutoGraph itself, which holds only if the body is that call and nothing else."""
    from tensorflow.python.autograph.impl.api import is_autograph_artifact

    import compat_grads as cg

    unwrapped = []
    for node in _public_functions():
        decorators = [ast.unparse(d) for d in node.decorator_list]
        assert decorators in (["_docs.public"], ["_docs.public_call"]), node.name
        assert is_autograph_artifact(getattr(cg, node.name)), node.name
        if decorators == ["_docs.public_call"]:
            unwrapped.append(node.name)
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            assert len(body) == 1 and isinstance(body[0], ast.Return), node.name
            assert ast.unparse(body[0].value.func) == "_call.run", node.name
            assert not hasattr(getattr(cg, node.name), "__wrapped__"), node.name
    assert {"stacked_jacobian", "per_element_gradients", "hessian"} <= set(unwrapped)
