"""Nests, shapes, dtypes and the checks that turn bad input into clear errors.

Everything here is mode-agnostic: it works on eager tensors and on graph tensors alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

import numpy as np

from compat_grads._src.core import tapes as _tapes
from compat_grads._src.core.checks import run_time_check
from compat_grads._src.core.errors import ModeError, describe, message
from compat_grads._src.core.rows import keeps_rows
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable

FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
_FLOAT_NAMES = "float16, bfloat16, float32 or float64"


@dataclasses.dataclass
class Problem:
    """One differentiation request, validated: what to differentiate and with respect to what.

    Exactly one of `target` (a tensor, or a nest of them when `nested_target`) and `fn` (a
    callable taking the sources nest) is set. `argument` is the public name of the sources
    ("source" for the batch functions, "primals", "weights"), for error messages. `order`
    counts the derivatives taken before this one (2 for the first derivative's own).
    """

    function: str
    target: object
    fn: Callable | None
    structure: object
    flat: list
    tape: tf.GradientTape | None = None
    nested_target: bool = False
    argument: str = "sources"
    order: int = 1

    def call(self):
        """Runs the callable target on the sources; returns its (checked) output."""
        return self.check_output(self.fn(self.pack(self.flat)), returned=True)

    def check_output(self, out, returned=False):
        if self.nested_target and tf.nest.is_nested(out):
            return tf.nest.map_structure(
                lambda t: check_target(self.function, t, returned), out)
        return check_target(self.function, out, returned)

    def pack(self, flat_results):
        return tf.nest.pack_sequence_as(self.structure, flat_results)


def numbers_in_a_list(function, sources, err):
    """A clear TypeError for a callable that failed (`err`) on sources given as a Python
    list of numbers, which is a nest of scalar sources (as in tf.gradients) where one
    tensor was meant; None for anything else."""
    if not isinstance(sources, (list, tuple)) or not all(
            isinstance(leaf, (int, float)) and not isinstance(leaf, bool)
            for leaf in tf.nest.flatten(sources)):
        return None
    return TypeError(message(
        function, "the sources are a Python list of numbers, which compat_grads reads as a "
        "nest of sources, one scalar tensor per number (as tf.gradients does), so the "
        f"callable got a list of scalars and failed ({err})",
        "Pass one tensor: np.array(...) or tf.constant(...) of the list; keep a list only "
        "for several separate sources."))


def make_problem(function, target, sources, tape=None, nested_target=False,
                 argument="sources") -> Problem:
    """Validates a public call's target, sources (the argument named `argument`) and tape
    into a `Problem`."""
    is_callable = callable(target) and not tf.is_tensor(target)
    if is_callable and tape is not None:
        raise ValueError(message(
            function, "tape= is only used with a tensor target, but target is a callable",
            "Drop tape=: compat_grads records the callable itself."))
    if tape is not None:
        check_tape(function, tape)
    flat = flatten_sources(function, sources, convert=is_callable, argument=argument)
    problem = Problem(function, None, target if is_callable else None, sources, flat, tape,
                      nested_target, argument)
    if not is_callable:
        problem.target = problem.check_output(_on_tape(tape, target))
        _not_swapped(function, problem.target, flat, leaf_paths(sources, argument))
    if tape is not None:
        _tapes.check(function, tape, problem.target, flat, leaf_paths(sources, argument))
    return problem


def _not_swapped(function, target, flat, paths):
    """ValueError for a source computed from the target (swapped arguments): the target
    cannot then depend on it, and every derivative would silently be None (or zeros)."""
    for leaf, path in zip(flat, paths):
        if leaf is not target and _tapes.derives_from(leaf, target):
            raise _tapes.swapped_error(function, path, "is computed from the target (the "
                                       "target is one of its inputs)")


def _on_tape(tape, target):
    """A variable target with a tape is read on the tape (`GradientTape.jacobian` does the
    same); read after recording it would be a new tensor, unconnected to the variable."""
    target = unwrap_variable(target)
    if tape is None or not isinstance(target, tf.Variable):
        return target
    return _tapes.read_variable(tape, target)


# Values TensorFlow would convert to constants: as sources or targets they are not connected
# to anything, so they get the clear error below instead.
_PLAIN = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, list, tuple, dict)


def implicit_tensor(value):
    """An object TensorFlow converts implicitly (a registered tensor conversion function, as
    probabilistic-programming random variables have) as the tensor `tf.gradients` would
    convert it to; anything else as it is.

    An object that converts to a new tensor each time (a constant made from its values) is
    connected to nothing: it is returned as it is, for the clear error that follows."""
    if value is None or tf.is_tensor(value) or isinstance(value, (tf.Variable, *_PLAIN)):
        return value
    try:
        first, second = tf.convert_to_tensor(value), tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        return value
    return first if first is second else value


def check_target(function, target, returned=False):
    where = "the callable target returned" if returned else "target is"
    if returned and target is None:
        raise TypeError(message(
            function, "the callable target returned None (a missing return statement?)",
            "Return the tensor to differentiate: end the function with `return y`."))
    target = implicit_tensor(target)
    if isinstance(target, tf.Variable):
        target = tf.convert_to_tensor(target)
    if returned and not tf.is_tensor(target) and not tf.nest.is_nested(target):
        target = tf.convert_to_tensor(target)
    check_dense(function, "target", target, where)
    if not tf.is_tensor(target):
        raise TypeError(message(
            function, f"target must be a tf.Tensor or a callable f(sources) -> tf.Tensor, "
            f"but {where} {describe(target)}",
            "Pass the tensor you want differentiated, or a function that computes it "
            "(one tensor; stack several outputs with tf.stack)."))
    if target.dtype.base_dtype not in FLOAT_DTYPES:
        raise TypeError(message(
            function, f"target must have a floating-point dtype ({_FLOAT_NAMES}), but "
            f"{where} {describe(target)}", _dtype_fix(target.dtype, "target")))
    return target


# Composite tensors pass tf.is_tensor, but no one op computes them, so neither tapes nor
# tf.gradients can differentiate them as a whole.
_DENSE_FIXES = {
    ("target", tf.RaggedTensor):
        "Return a dense tensor: y.to_tensor() (padded with zeros), or y.flat_values (the "
        "stored values)",
    ("target", tf.SparseTensor):
        "Return a dense tensor: tf.sparse.to_dense(y), or y.values (the stored values)",
    ("source", tf.RaggedTensor):
        "Convert it first with x.to_tensor(), or differentiate with respect to its values: "
        "pass x.flat_values and rebuild it inside f with x.with_flat_values(values)",
    ("source", tf.SparseTensor):
        "Convert it first with tf.sparse.to_dense(x), or differentiate with respect to its "
        "values: pass x.values and rebuild it inside f with tf.SparseTensor(x.indices, "
        "values, x.dense_shape)",
}


def check_dense(function, kind, value, where):
    """A clear error for a ragged, sparse or IndexedSlices `kind` ("target" or "source")."""
    if isinstance(value, tf.IndexedSlices):
        fix = "Convert it to a dense tensor first: tf.convert_to_tensor(x)"
    else:
        fix = next((text for (k, cls), text in _DENSE_FIXES.items()
                    if k == kind and isinstance(value, cls)), None)
    if fix is not None:
        raise TypeError(message(
            function, f"{where} a {describe(value)}, but compat_grads differentiates "
            f"dense tensors only", f"{fix}."))


def _dtype_fix(dtype, kind):
    """What to do about a target or source dtype that has no derivative."""
    if dtype.is_complex:
        return ("Complex derivatives are not supported: differentiate the real and "
                "imaginary parts (tf.math.real, tf.math.imag) as float tensors.")
    if dtype == tf.string:
        return "A string tensor has no derivative: pass the float tensor it was made from."
    if kind == "target":
        return ("Derivatives of integer or bool outputs do not exist: differentiate the "
                "float tensor they were computed from.")
    return ("Integer and bool tensors have no gradient: cast them with "
            "tf.cast(x, tf.float32) and compute the target from the cast tensor.")


def check_tape(function, tape):
    """The tape's type was checked with the options (`_options`); here: its record."""
    # A non-persistent tape drops its record (`_tape`) once it has computed gradients;
    # TensorFlow only notices deep inside the computation, so check here.
    if getattr(tape, "_tape", True) is None and not getattr(tape, "_persistent", True):
        raise RuntimeError(message(
            function, "the tape has no record: it is a non-persistent GradientTape that "
            "was already used (or never entered)",
            "In a graph (a TF1 graph or a tf.Graph() block), drop tape=: compat_grads "
            "differentiates graph tensors itself. In eager code, create it with "
            "tf.GradientTape(persistent=True) to use it several times, or record the target "
            "again, or pass a callable target."))


def flatten_sources(function, sources, convert=False, argument="sources") -> list:
    """The flat list of source leaves, checked: non-empty, tensors or variables, floating."""
    flat = tf.nest.flatten(sources)
    if not flat:
        raise ValueError(message(
            function, f"{argument} is empty (got {sources!r})",
            "Pass the tensor or variable to differentiate with respect to, or a non-empty "
            "list / tuple / dict of them."))
    return [_check_source(function, leaf, path, convert)
            for leaf, path in zip(flat, leaf_paths(sources, argument))]


def _check_source(function, leaf, path, convert):
    leaf = implicit_tensor(unwrap_variable(leaf))
    if convert and isinstance(leaf, (np.ndarray, np.generic, float)):
        leaf = tf.convert_to_tensor(leaf)
    check_dense(function, "source", leaf, f"{path} is")
    if not (tf.is_tensor(leaf) or isinstance(leaf, tf.Variable)):
        raise TypeError(message(
            function, f"{path} must be a tf.Tensor or tf.Variable, but got {describe(leaf)}",
            "Pass the tensors the target was computed from (a tensor target only depends "
            "on the exact tensors used to build it)."))
    if leaf.dtype.base_dtype not in FLOAT_DTYPES:
        raise TypeError(message(
            function, f"{path} must be floating-point ({_FLOAT_NAMES}), but got "
            f"{describe(leaf)}", _dtype_fix(leaf.dtype, "source")))
    return leaf


def single_source(name, problem):
    """The one source of a function that takes one (a TypeError for a nest of them)."""
    if len(problem.flat) != 1 or tf.nest.is_nested(problem.structure):
        raise TypeError(message(
            name, f"source must be one tensor or variable, but got a "
            f"{type(problem.structure).__name__} of {len(problem.flat)}",
            "Call it once per source, or use stacked_jacobian for a nest of sources."))
    return problem.flat


def leaf_paths(structure, prefix="sources") -> list:
    """Readable paths (`sources['w'][0]`) in `tf.nest.flatten` order, for error messages."""
    if isinstance(structure, dict):
        return [p for key in sorted(structure)
                for p in leaf_paths(structure[key], f"{prefix}[{key!r}]")]
    if isinstance(structure, (list, tuple)):
        return [p for i, item in enumerate(structure)
                for p in leaf_paths(item, f"{prefix}[{i}]")]
    return [prefix]


def graph_of(value):
    """The graph of a graph tensor or variable; None for eager ones and anything else."""
    try:
        return value.graph
    except AttributeError:  # eager tensors and variables have no graph
        return None


def eager_tensor_error(function) -> ModeError:
    return ModeError(message(
        function, "target is an eager tensor, but no tape was given",
        "Pass the GradientTape that recorded it (tape=...) or pass a callable f(x)."))


def check_batch(function, target, source, per_sample_scalar=False):
    """Checks that target and source share a leading batch dimension (and, if asked, that the
    target holds one scalar per sample).

    Returns the assertions to run when what they check is only known at run time (an
    unknown batch size or rank), else None.
    """
    scalar_known = _per_sample_scalar(function, target) if per_sample_scalar else True
    pair = (("target", target), ("source", source))
    for name, value in pair:
        if value.shape.rank == 0:
            raise ValueError(message(
                function, f"{name} needs a leading batch dimension, but it is a scalar",
                "Use stacked_jacobian for unbatched tensors, or add the batch axis."))
    batch_target, batch_source = target.shape[:1], source.shape[:1]
    if not batch_target.is_compatible_with(batch_source):
        raise ValueError(message(
            function, f"target and source must have the same batch size (first "
            f"dimension), but target has shape {target.shape} and source {source.shape}",
            "Pass the batched input the per-sample outputs were computed from; for a full "
            "Jacobian between unbatched tensors use stacked_jacobian."))
    guards = [run_time_check(
        function, f"{name} needs a leading batch dimension", "Add the batch axis.",
        tf.debugging.assert_rank_at_least, value, 1)
        for name, value in pair if value.shape.rank is None]
    with after(tf.group(guards) if guards else None):  # shape[0] of a scalar would fail first
        if not scalar_known:
            guards.append(run_time_check(
                function, "target must hold one scalar per sample, shape (b,) or (b, 1)",
                "Reduce each sample's output to the scalar you want (e.g. its loss).",
                tf.debugging.assert_equal, tf.size(target), tf.shape(target)[0]))
        if not (batch_target.is_fully_defined() and batch_source.is_fully_defined() or
                keeps_rows(target, source)):
            guards.append(run_time_check(
                function, "target and source must have the same batch size (first "
                "dimension)", "Pass the batched input the per-sample outputs were computed "
                "from, and keep the samples apart (no reshape or concat across them).",
                tf.debugging.assert_equal, tf.shape(target)[0], tf.shape(source)[0]))
    return tf.group(guards) if guards else None


def _per_sample_scalar(function, target) -> bool:
    """Whether the target is known to be `(b,)` or `(b, 1)` (False: only known at run time);
    ValueError when it is known not to be."""
    shape = target.shape
    second = tf.compat.dimension_value(shape[1]) if shape.rank == 2 else None
    if shape.rank == 1 or second == 1:
        return True
    if shape.rank is None or (shape.rank == 2 and second is None):
        return False
    raise ValueError(message(
        function, f"target must hold one scalar per sample, shape (b,) or (b, 1), but "
        f"it has shape {shape}",
        "Reduce each sample's output to the scalar whose Hessian you want (e.g. its "
        "loss), or use hessian for the full block structure."))


def check_scalar(function, target):
    """`target` if it has exactly one element (when its shape is known), else ValueError."""
    if target.shape.num_elements() not in (1, None):
        raise ValueError(message(
            function, f"f must return a scalar, but it returned shape {target.shape}",
            "Reduce the output to a scalar (e.g. tf.reduce_sum) or use hessian for a "
            "non-scalar target."))
    return target


def match_sources(function, name, problem, values) -> list:
    """`values` flattened like the sources, each converted to its source's dtype and
    checked against its shape."""
    return _match(function, name, "the primals", problem.structure, problem.flat, values)


def match_outputs(function, outputs, values) -> list:
    """`values` flattened like the outputs of f, with their dtypes and shapes."""
    return _match(function, "cotangents", "the outputs of f", outputs,
                  tf.nest.flatten(outputs), values)


def _match(function, name, what, structure, like, values):
    try:
        tf.nest.assert_same_structure(structure, values, check_types=False)
    except (TypeError, ValueError) as err:
        raise TypeError(message(
            function, f"{name} must have the structure of {what}, but got "
            f"{describe(values)} ({str(err).splitlines()[0]})",
            f"Pass one of them per leaf of {what}, in the same list / tuple / dict.")) \
            from err
    out = []
    for value, ref, path in zip(tf.nest.flatten(values), like, leaf_paths(values, name)):
        try:
            value = tf.convert_to_tensor(value, dtype=dtype_of(ref))
        except (TypeError, ValueError) as err:
            raise TypeError(message(
                function, f"{path} must have dtype {dtype_of(ref).name} like its "
                f"counterpart in {what}, but got {describe(value)}",
                "Cast it with tf.cast.")) from err
        if not value.shape.is_compatible_with(ref.shape):
            raise ValueError(message(
                function, f"{path} must have shape {ref.shape} like its counterpart in "
                f"{what}, but has shape {value.shape}", "Pass one of that shape."))
        out.append(value)
    return out


def after(guard):
    """A context in which every op waits for the run-time check `guard` (if any)."""
    return contextlib.nullcontext() if guard is None else tf.control_dependencies([guard])


def densify(grad):
    """A dense tensor from a gradient that may be `tf.IndexedSlices` (gather, embeddings)."""
    if isinstance(grad, tf.IndexedSlices):
        return tf.math.unsorted_segment_sum(grad.values, grad.indices, grad.dense_shape[0])
    return grad


def only(k, value, count) -> list:
    """Tangents (or cotangents) that are `value` for source k and zero (None) for every
    other source."""
    return [value if j == k else None for j in range(count)]


def pairs(values, weights):
    """([a_k], [w_k]) over the k where neither is None; None if there are none."""
    kept = [(a, w) for a, w in zip(values, weights) if a is not None and w is not None]
    return ([a for a, _ in kept], [w for _, w in kept]) if kept else None


def zeros_for_none(values, like):
    """`values` with each None replaced by zeros shaped like `like[k]`: still unconnected."""
    return [tf.zeros(tf.shape(ref), dtype_of(ref)) if v is None else v
            for v, ref in zip(values, like)]


def dtype_of(x) -> tf.DType:
    return x.dtype.base_dtype


class _Ones:
    """A cotangent of ones left to the framework (`tf.gradients`' and the tape's own
    default): the gradient a user writes with no `grad_ys`, op for op, with no Identity
    `tf.gradients` would add around a given one."""

    def __repr__(self):
        return "ONES"


ONES = _Ones()


def framework_cotangents(cotangents) -> list:
    """`cotangents` as `tf.gradients` (`grad_ys`) and `GradientTape.gradient`
    (`output_gradients`) take them: None for ONES, their default of ones."""
    if cotangents is None:
        return None
    return [None if u is ONES else u for u in cotangents]


def ones_of(t):
    """Ones shaped like t as a gradient's cotangent: a Fill of t's (integer) shape, which no
    derivative flows through. `tf.ones_like(t)` is a float tensor made from t, so
    differentiating the gradient again would build the gradient of the ops behind it too,
    which nothing uses."""
    return tf.ones(tf.shape(t), t.dtype)


def size(x):
    """Number of elements: a Python int when static, else a scalar tensor."""
    static = x.shape.num_elements()
    return static if static is not None else tf.size(x)


def rank(x):
    """The rank: a Python int when static, else a scalar tensor."""
    return x.shape.rank if x.shape.rank is not None else tf.rank(x)


def per_sample_size(x):
    """Elements per sample (all axes but the first): Python int when static."""
    static = x.shape[1:].num_elements()
    return static if static is not None else tf.reduce_prod(tf.shape(x)[1:])


def reshape(x, shape, static_shape: tf.TensorShape):
    """tf.reshape that keeps every statically known dimension."""
    out = tf.reshape(x, shape)
    out.set_shape(static_shape)
    return out


def one_hot_like(like, index, dtype, batched: bool):
    """A tensor shaped like `like` with a single 1 at flat `index`.

    With `batched`, the 1 is at per-sample position `index` in every sample.
    """
    shape = tf.shape(like)
    if not batched:
        return tf.reshape(tf.one_hot(index, size(like), dtype=dtype), shape)
    row = tf.one_hot(index, per_sample_size(like), dtype=dtype)
    return tf.reshape(tf.broadcast_to(row, [shape[0], tf.size(row)]), shape)


def zeros(static_shape, shape, dtype):
    return reshape(tf.zeros(shape, dtype), shape, static_shape)
