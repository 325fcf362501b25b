"""What the names of one module stand for: TensorFlow import aliases, tapes, known tensors.

The analysis is flow-insensitive on purpose: a name that is both imported from TensorFlow and
bound otherwise is dropped, so a look-alike never produces a finding."""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from collections.abc import Iterable

_ROOTS = {"tensorflow": "tf", "tf": "tf", "keras": "tf.keras"}
_PREFIXES = (("tf.compat.v1", "tf"), ("tf.compat.v2", "tf"), ("tf.python.keras", "tf.keras"))
# TensorFlow's private spellings of public functions the rules read, which copied TF1 code
# keeps (influence functions copy `_hessian_vector_product` with them): `array_ops_stack`
# (TensorFlow 2.13 on), `array_ops` with the pre-1.0 names `pack` / `unpack`, and the
# functions behind `tf.gradients`, `tf.multiply`, `tf.reduce_sum`, `tf.add_n` and
# `tf.stop_gradient`. They are the public functions (`tf.compat.v1.gradients` is
# `gradients_impl.gradients`) and take their arguments.
_PRIVATE = {f"tf.python.ops.{module}.{name}": f"tf.{public}"
            for module, names in (("array_ops_stack", ("stack", "unstack")),
                                  ("array_ops", ("stack", "unstack", "pack", "unpack")))
            for name, public in zip(names, ("stack", "unstack") * 2)} | {
    f"tf.python.ops.{name}": f"tf.{name.rpartition('.')[2]}"
    for name in ("gradients_impl.gradients", "math_ops.multiply", "math_ops.reduce_sum",
                 "math_ops.add_n", "array_ops.stop_gradient")}
# Calls that return one tensor: a name bound only to these is a tensor, not a list.
_TENSOR_CALLS = frozenset(f"tf.{n}" for n in (
    "Variable constant placeholder get_variable convert_to_tensor zeros ones fill eye range "
    "linspace zeros_like ones_like random_normal random_uniform truncated_normal reshape "
    "matmul concat stack cast identity squeeze expand_dims transpose tile reduce_sum "
    "reduce_mean reduce_prod exp log sin cos tanh sigmoid square sqrt pow einsum abs maximum "
    "minimum add subtract multiply divide negative nn.softmax nn.log_softmax nn.relu "
    "nn.sigmoid nn.tanh nn.softplus nn.elu nn.bias_add"
).split())
_TENSOR_PREFIXES = ("tf.random.", "tf.math.", "tf.linalg.")
# Under those prefixes, calls that return a tuple, a list or no tensor at all. Classes
# (`tf.linalg.LinearOperator...`, `tf.random.Generator`) and the `experimental` namespaces
# are excluded by rule in `Names.is_tensor`.
_TUPLE_CALLS = frozenset(f"tf.{n}" for n in (
    "math.top_k math.approx_max_k math.approx_min_k linalg.eigh linalg.eig linalg.svd "
    "linalg.qr linalg.lu linalg.slogdet linalg.normalize linalg.eigh_tridiagonal "
    "random.set_seed random.get_global_generator random.all_candidate_sampler "
    "random.fixed_unigram_candidate_sampler random.learned_unigram_candidate_sampler "
    "random.log_uniform_candidate_sampler random.uniform_candidate_sampler"
).split())


def canonical(dotted: str) -> str | None:
    """`tensorflow.compat.v1.gradients` -> `tf.gradients`; None outside TensorFlow / Keras."""
    root, _, rest = dotted.partition(".")
    if root not in _ROOTS:
        return None
    name = _ROOTS[root] + ("." + rest if rest else "")
    for prefix, replacement in _PREFIXES:
        if name == prefix or name.startswith(prefix + "."):
            name = replacement + name[len(prefix):]
    return _PRIVATE.get(name, name)


class Names:
    """The bindings of one module (or of all code cells of one notebook).

    Attributes:
      aliases: local name -> canonical TensorFlow name (`tf`, `tf.gradients`, ...).
      bound: every name bound anywhere, by any statement.
      tensors: names bound only to single-tensor values.
      tapes: names bound to a `tf.GradientTape`.
      functions: function name -> its definitions.
    """

    def __init__(self, trees: Iterable[ast.Module]):
        nodes = [node for tree in trees for node in ast.walk(tree)]
        imported, self.modules = _imports(nodes)
        others = _other_bindings(nodes)
        self.bound = set(imported) | others | set(self.modules)
        self.aliases = {k: v for k, v in imported.items() if k not in others}
        for _ in range(2):  # `tf = tf.compat.v1` first, then `K = tf.keras.backend`
            self.aliases.update((k, v) for k, v in _assigned_aliases(
                nodes, imported, self.aliases).items() if k not in self.modules)
        self.functions: dict[str, list[ast.FunctionDef]] = defaultdict(list)
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions[node.name].append(node)
        self.tapes = {name for name, value in _bindings(nodes)
                      if value is not None and self.qualname(value) == "tf.GradientTape"}
        self.tensors: set[str] = set()
        self._infer_tensors(nodes)

    def qualname(self, node: ast.AST) -> str | None:
        """The canonical TensorFlow name of `tf.x.y`-like expressions (calls: of their func)."""
        if isinstance(node, ast.Call):
            node = node.func
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return canonical(".".join([self.aliases[node.id], *reversed(parts)]))

    def prefix(self, module: str) -> str | None:
        """A local name bound to `module` ("tf" or "compat_grads"), or None."""
        names = sorted(n for n, v in {**self.aliases, **self.modules}.items() if v == module)
        return next((n for n in names if n in ("tf", "cg")), names[0] if names else None)

    def is_tensor(self, node: ast.expr) -> bool:
        """Whether `node` is provably one tensor (not a list of them)."""
        if isinstance(node, ast.Name):
            return node.id in self.tensors
        if isinstance(node, ast.Call):
            name = self.qualname(node)
            if name is None or name in _TUPLE_CALLS:
                return False
            last = name.rpartition(".")[2]
            return name in _TENSOR_CALLS or (
                name.startswith(_TENSOR_PREFIXES) and ".experimental." not in name
                and not last[:1].isupper())
        if isinstance(node, ast.BinOp):
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if isinstance(node, ast.UnaryOp | ast.Subscript):
            return self.is_tensor(node.operand if isinstance(node, ast.UnaryOp) else node.value)
        return False

    def _infer_tensors(self, nodes: list[ast.AST]) -> None:
        values = defaultdict(list)
        for name, value in _bindings(nodes):
            values[name].append(value)
        for _ in range(3):  # names defined from names: a few rounds reach a fixed point
            self.tensors = {name for name, vs in values.items()
                            if all(v is not None and self.is_tensor(v) for v in vs)}


def _imports(nodes: list[ast.AST]) -> tuple[dict[str, str], dict[str, str]]:
    """(TensorFlow aliases, other module aliases such as compat_grads)."""
    aliases, modules = {}, {}
    for node in nodes:
        for local, dotted in _imported_names(node):
            name = canonical(dotted)
            if name is not None:
                aliases[local] = name
            else:
                modules[local] = dotted
    return aliases, modules


def _assigned_aliases(nodes: list[ast.AST], imported: dict[str, str],
                      clean: dict[str, str]) -> dict[str, str]:
    """`K = tf.keras.backend` (or `tf = tf.compat.v1`): names bound only by plain assignments
    (and imports) of one TensorFlow module or function, spelled with a `clean` alias (or the
    name itself)."""
    stores = Counter(n.id for n in nodes if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store | ast.Del))
    special = _other_bindings([n for n in nodes if not isinstance(n, ast.Name)])
    targets: dict[str, set] = defaultdict(set)
    counts: Counter = Counter()
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        parts, value = [], node.value
        while isinstance(value, ast.Attribute):
            parts.append(value.attr)
            value = value.value
        name = node.targets[0].id
        if isinstance(value, ast.Name) and value.id in imported and (
                value.id in clean or value.id == name):
            targets[name].add(canonical(".".join([imported[value.id], *reversed(parts)])))
            counts[name] += 1
    aliases = {}
    for name, resolved in targets.items():
        if name in imported:
            resolved = resolved | {imported[name]}
        if counts[name] == stores[name] and name not in special and len(resolved) == 1:
            aliases[name] = next(iter(resolved))
    return aliases


def _imported_names(node: ast.AST) -> list[tuple[str, str]]:
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.partition(".")[0], a.name if a.asname
                 else a.name.partition(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names
                if a.name != "*"]
    return []


def _other_bindings(nodes: list[ast.AST]) -> set[str]:
    """Names bound by anything but an import: assignments, defs, parameters, handlers."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
    return names


def _bindings(nodes: list[ast.AST]) -> Iterable[tuple[str, ast.expr | None]]:
    """(name, value) for every binding; value None when it is not a plain `name = value`."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                value = node.value if isinstance(target, ast.Name) else None
                yield from ((n.id, value) for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            yield node.optional_vars.id, node.context_expr
        elif isinstance(node, ast.arg):
            yield node.arg, None
        elif isinstance(node, ast.For | ast.comprehension | ast.AnnAssign | ast.NamedExpr):
            target = node.target
            yield from ((n.id, None) for n in ast.walk(target) if isinstance(n, ast.Name))
