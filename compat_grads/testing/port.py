"""`compare_port`: does a TF2 port compute what its TF1 original computes, derivatives too?

The legacy function runs in a TF1 graph process (`compat_grads.testing.remote`), the port
here in TF2; both sides compute the same derivatives with the same compat_grads functions,
so the comparison is of the two models, not of two ways to differentiate.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from compat_grads._src.core.errors import ModeError, describe, message
from compat_grads._src.core.models import is_keras_layer, unwrap_variable
from compat_grads._src.core.tf import tf
from compat_grads.dispatch import runs_eagerly
from compat_grads.testing import modes as _modes
from compat_grads.testing import remote
from compat_grads.testing.port_report import PortReport, PortRow, compare_values, tolerance

DERIVATIVES = ("stacked_jacobian", "per_element_gradients", "batch_jacobian", "hessian",
               "batch_hessian")
PORT_MODES = ("eager", "function")
# These take every source at once (one pass); the others take one source each.
_ALL_SOURCES_AT_ONCE = ("stacked_jacobian", "per_element_gradients")
_NAME = "testing.compare_port"


def compare_port(legacy: Callable, ported: Callable, inputs: Mapping[str, np.ndarray], *,
                 wrt: str | Sequence[str] = (),
                 derivatives: str | Sequence[str] = ("stacked_jacobian",),
                 weights: Mapping[str, tf.Variable] | None = None,
                 modes: str | Sequence[str] = ("eager",), rtol: float | None = None,
                 atol: float | None = None) -> PortReport:
    """Compares a TF1 graph function with its TF2 port: outputs and derivatives.

    `legacy(**placeholders)` is built in a TF1 graph process (v2 behaviour disabled), with
    one `tf.compat.v1.placeholder` per entry of `inputs`, and run in a Session with `inputs`
    fed and its variables initialized. `ported(**tensors)` runs here, in each of `modes`.
    Each mapped legacy variable's initialized value is first copied into its ported
    variable. Then every output, and each derivative of every float output with respect to
    each name in `wrt`, is compared: the same compat_grads function on both sides.

    Args:
      legacy: TF1 graph code; an importable module-level function (the TF1 process imports
        it by name). It returns a tensor or a nest (dict, list, tuple) of tensors.
      ported: the TF2 code (any callable: function, `tf.Module`, Keras model) returning the
        same nest. It is called with `**tensors`; a Keras model or layer gets its single
        input positionally, or the dict of its inputs when there are several.
      inputs: {name: numpy array}; each side is called with one tensor per name.
      wrt: names to differentiate with respect to: keys of `inputs` and/or of `weights`.
      derivatives: any of "stacked_jacobian", "per_element_gradients", "batch_jacobian",
        "hessian", "batch_hessian" (the last three one `wrt` name at a time).
      weights: {legacy variable name (`v.op.name`, e.g. "net/dense/kernel"): the ported
        `tf.Variable` playing its role}.
      modes: "eager" and/or "function" (the port inside `tf.function`).
      rtol, atol: override the tolerances by dtype (`compat_grads.testing.PORT_TOLERANCE`):
        `|ported - legacy| <= atol * max(1, max|legacy|) + rtol * |legacy|` per element.

    Returns:
      A `PortReport`: one row per (mode, output, quantity, wrt), `.ok`, `.assert_ok()`.

    Raises:
      TypeError, ValueError: for arguments that cannot be compared (a legacy function the
        TF1 process cannot import, unknown names, a weight whose shape or dtype differs).
      compat_grads.ModeError: when called from a graph (TF1 code, `tf.Graph().as_default()`):
        the port runs in TF2 here.
      Whatever `legacy` raises while its graph is built or run, with the TF1 process's
        traceback as its cause (a legacy function that does not run is not a port finding).
    """
    if not runs_eagerly():
        raise ModeError(message(
            _NAME, "the port runs in TF2 in this process, but this code runs in a graph (v2 "
            "behaviour disabled, or inside tf.Graph().as_default())", "Call compare_port "
            "from TF2 code (eager); the legacy side gets a TF1 process of its own"))
    legacy_name = _check_importable(legacy)
    inputs, wrt, derivatives, modes, weights = _checked(
        ported, inputs, wrt, derivatives, modes, weights)
    side = remote.call(legacy_side, legacy, inputs, wrt, derivatives,
                       label=f"the legacy side of compare_port ({legacy_name})")
    _copy_weights(weights, side["variables"])
    rows, read = [], set()
    for mode in modes:
        try:
            ported_side = _ported_side(ported, inputs, weights, wrt, derivatives, mode)
        except Exception as error:  # the port cannot run in this mode: a finding
            ported_side = _failed_side(side, error)
        read |= ported_side["read"]
        rows += _rows(side, ported_side, mode, rtol, atol)
    mapped, names = {id(v) for v in weights.values()}, _variable_paths(ported)
    unmapped = {"legacy": sorted(set(side["trainable"]) - set(weights)),
                "ported": sorted(names.get(key, name) for key, name in read
                                 if key not in mapped)}
    return PortReport(rows, unmapped, legacy_name)


# --- arguments --------------------------------------------------------------------------


def _check_importable(legacy) -> str:
    """`module.qualname` of `legacy`, which the TF1 process must be able to import."""
    module, qualname = getattr(legacy, "__module__", None), getattr(legacy, "__qualname__", "")
    found = None
    if module and module != "__main__" and "<" not in qualname:
        found = resolve(module, qualname)
    if found is not legacy:
        where = f"{module}.{qualname}" if module else describe(legacy)
        raise TypeError(message(
            _NAME, f"legacy must be an importable module-level function, because it runs in "
            f"a separate TF1 process that imports it by name; got {where}",
            "Define it at the top level of a module (your test file works) and pass it"))
    return f"{module}.{qualname}"


def resolve(module, qualname):
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        return found
    except (ImportError, AttributeError):
        return None


def _checked(ported, inputs, wrt, derivatives, run_modes, weights):
    if not callable(ported):
        raise TypeError(message(_NAME, f"ported must be callable, got {describe(ported)}",
                                "Pass the TF2 function, tf.Module or Keras model"))
    inputs = _checked_inputs(inputs)
    weights = _checked_weights(weights)
    wrt = _checked_names("wrt", [wrt] if isinstance(wrt, str) else list(wrt), inputs, weights)
    derivatives = _checked_choice(
        "derivatives", [derivatives] if isinstance(derivatives, str) else derivatives,
        DERIVATIVES)
    run_modes = _checked_choice("modes", [run_modes] if isinstance(run_modes, str)
                                else run_modes, PORT_MODES)
    if not run_modes:
        raise ValueError(message(_NAME, "modes is empty", 'Pass "eager" and/or "function"'))
    return inputs, wrt, derivatives, run_modes, weights


def _checked_inputs(inputs) -> dict:
    if not isinstance(inputs, dict) or not inputs:
        raise TypeError(message(
            _NAME, f"inputs must be a non-empty dict of name -> numpy array, got "
            f"{describe(inputs)}", "Pass e.g. inputs={'x': np.ones((32, 16), np.float32)}"))
    bad = [n for n in inputs if not (isinstance(n, str) and n.isidentifier())]
    if bad:
        raise ValueError(message(
            _NAME, f"inputs names must be Python identifiers (both functions are called "
            f"with them as keyword arguments), got {bad}", "Rename those inputs"))
    return {name: np.asarray(value) for name, value in inputs.items()}


def _checked_weights(weights) -> dict:
    weights = {name: unwrap_variable(v) for name, v in dict(weights or {}).items()}
    bad = {k: describe(v) for k, v in weights.items() if not isinstance(v, tf.Variable)}
    if bad:
        raise TypeError(message(
            _NAME, f"weights maps legacy variable names to the ported tf.Variables, but "
            f"got {bad}", "Pass the ported side's variables themselves (e.g. "
            "model.dense.kernel), keyed by the legacy v.op.name"))
    return weights


def _checked_names(what, names, inputs, weights) -> list:
    unknown = [n for n in names if n not in inputs and n not in weights]
    both = [n for n in names if n in inputs and n in weights]
    if unknown or both:
        problem = (f"{what} names {unknown}, which are neither inputs ({sorted(inputs)}) nor "
                   f"weights ({sorted(weights)})" if unknown else
                   f"{what} names {both}, which are both an input and a weight")
        raise ValueError(message(_NAME, problem, "Use the names of inputs or weights keys"))
    return list(dict.fromkeys(names))


def _checked_choice(what, values, allowed) -> list:
    values = list(values)
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(message(_NAME, f"{what} must be among {list(allowed)}, got {bad}",
                                 f"Choose {what} from that list"))
    return list(dict.fromkeys(values))


def _copy_weights(weights, legacy_values) -> None:
    for name, variable in weights.items():
        if name not in legacy_values:
            raise ValueError(message(
                _NAME, f"weights names the legacy variable {name!r}, which the legacy graph "
                f"does not have; it has {sorted(legacy_values)}",
                "Key weights by the legacy variables' v.op.name"))
        value = legacy_values[name]
        ported = (tuple(variable.shape), variable.dtype.name)
        if (value.shape, value.dtype.name) != ported:
            raise ValueError(message(
                _NAME, f"the legacy variable {name!r} has shape {value.shape} and dtype "
                f"{value.dtype.name}, but the ported variable {variable.name!r} mapped to it "
                f"has shape {ported[0]} and dtype {ported[1]}",
                "Map each legacy variable to the ported variable that plays its role"))
        variable.assign(value)


def _variable_paths(ported) -> dict:
    """{id(variable): "attribute.path (name)"} for the variables of a tf.Module (Keras 2
    models are tf.Modules), to name unmapped ones; {} for other callables."""
    flatten = getattr(ported, "_flatten", None)
    try:
        found = flatten(predicate=lambda v: isinstance(v, tf.Variable), with_path=True)
        return {id(v): f"{'.'.join(map(str, path))} ({v.name})" for path, v in found}
    except Exception:  # not a tf.Module: the variables' own names will do
        return {}


# --- the two sides ----------------------------------------------------------------------


def legacy_side(legacy, inputs, wrt, derivatives) -> dict:
    """Runs in the TF1 process: the legacy graph's outputs, derivatives and variables."""
    with tf.Graph().as_default():
        feeds = {name: _modes.placeholder(array, name) for name, array in inputs.items()}
        outputs = paths(legacy(**feeds))
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        sources = {n: feeds[n] if n in feeds else variables.get(n) for n in wrt}
        found, errors = _quantities(outputs, lambda path, names: outputs[path],
                                    {n: s for n, s in sources.items() if s is not None},
                                    derivatives)
        values = _modes.session_values(
            {"found": found, "variables": variables},
            {feeds[name]: array for name, array in inputs.items()})
        trainable = [v.op.name for v in tf.compat.v1.trainable_variables()]
    return {**values, "errors": errors, "trainable": trainable, "outputs": list(outputs)}


def _ported_side(ported, inputs, weights, wrt, derivatives, mode) -> dict:
    errors, read, order = {}, set(), []

    def compute(tensors):
        with tf.GradientTape() as tape:
            outputs = paths(call_port(ported, tensors))
        read.update((id(v), v.name) for v in tape.watched_variables())
        order[:] = list(outputs)
        sources = {n: tensors[n] if n in tensors else weights[n] for n in wrt}
        found, failed = _quantities(outputs, _target(ported, tensors), sources, derivatives,
                                    compile=False)
        errors.update(failed)
        return found

    tensors = {name: tf.constant(array) for name, array in inputs.items()}
    run = tf.function(compute) if mode == "function" else compute
    return {"found": _modes.to_numpy(run(tensors)), "errors": errors, "read": read,
            "outputs": order}


def call_port(ported, tensors: dict):
    """`ported(**tensors)`; a Keras model or layer takes its single input positionally, or
    the dict of its inputs (a functional model keys them by its Input names)."""
    if is_keras_layer(ported):
        return ported(next(iter(tensors.values())) if len(tensors) == 1 else tensors)
    return ported(**tensors)


def _failed_side(legacy, error) -> dict:
    """The ported side when the port itself raised: every legacy row fails with the error."""
    keys = [*legacy["found"], *legacy["errors"]]
    return {"found": {}, "errors": dict.fromkeys(keys, one_line(error)), "read": set(),
            "outputs": legacy["outputs"]}


def _target(ported, tensors):
    """The callable target for the output at `path`, for a derivative with respect to
    `names` (one source, or a dict of them)."""
    def for_path(path, names):
        def target(sources):
            given = sources if isinstance(sources, dict) else {names[0]: sources}
            replaced = {n: s for n, s in given.items() if n in tensors}
            return paths(call_port(ported, {**tensors, **replaced}))[path]
        return target
    return for_path


def _quantities(outputs, target, sources, derivatives, **options):
    """({(path, quantity, wrt): tensor or None}, {key: error}) for every output's value and
    each derivative of its float outputs with respect to `sources`."""
    import compat_grads as cg

    found, errors = {}, {}
    for path, output in outputs.items():
        found[path, "value", ""] = output
        if not (tf.is_tensor(output) and output.dtype.is_floating):
            continue
        for derivative in derivatives:
            at_once = derivative in _ALL_SOURCES_AT_ONCE
            groups = [list(sources)] if at_once and sources else [[n] for n in sources]
            for names in groups:
                keys = [(path, derivative, n) for n in names]
                chosen = {n: sources[n] for n in names} if at_once else sources[names[0]]
                try:
                    result = getattr(cg, derivative)(target(path, names), chosen, **options)
                except Exception as error:  # a finding for the report, not a crash
                    errors.update(dict.fromkeys(keys, one_line(error)))
                    continue
                found.update(zip(keys, [result[n] for n in names] if at_once else [result]))
    return found, errors


def one_line(error) -> str:
    """`Type: first line`; for an error raised while tracing a tf.function, whose message
    starts with "in user code:" and a traceback, its last line (the error itself)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if lines and lines[0] == "in user code:":
        return lines[-1]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def paths(nest) -> dict:
    """{path: leaf} of an output nest: "output" for a single leaf, else keys and indices
    joined by "/" ("logits", "heads/0")."""
    if not isinstance(nest, (dict, list, tuple)):
        return {"output": nest}
    flat = {}
    _walk(nest, "", flat)
    return flat


def _walk(nest, prefix, flat):
    if isinstance(nest, dict):
        items = [(str(k), nest[k]) for k in sorted(nest)]
    elif isinstance(nest, (list, tuple)):
        fields = getattr(nest, "_fields", None)
        items = list(zip(fields or map(str, range(len(nest))), nest))
    else:
        flat[prefix] = nest
        return
    for key, value in items:
        _walk(value, f"{prefix}/{key}" if prefix else key, flat)


# --- rows -------------------------------------------------------------------------------


def _rows(legacy, ported, mode, rtol, atol) -> list:
    rows = []
    for key in _keys(legacy, ported):
        path, quantity, name = key
        if quantity == "value" and (path in legacy["outputs"]) != (path in ported["outputs"]):
            side = "legacy" if path in legacy["outputs"] else "ported"
            rows.append(PortRow.missing(mode, path, side))
            continue
        rows.append(_row(mode, key, _side_value(legacy, key), _side_value(ported, key),
                         rtol, atol))
    return rows


def _keys(legacy, ported) -> list:
    keys = {**dict.fromkeys(legacy["found"]), **dict.fromkeys(legacy["errors"]),
            **dict.fromkeys(ported["found"]), **dict.fromkeys(ported["errors"])}
    shared = set(legacy["outputs"]) & set(ported["outputs"])
    return [k for k in keys if k[1] == "value" or k[0] in shared]


def _side_value(side, key):
    """("error", text) or ("value", array or None) for `key` on one side."""
    if key in side["errors"]:
        return "error", side["errors"][key]
    return "value", side["found"].get(key)


def _row(mode, key, legacy, ported, rtol, atol) -> PortRow:
    path, quantity, name = key
    fields = dict(mode=mode, output=path, quantity=quantity, wrt=name)
    if legacy[0] == "error" or ported[0] == "error":
        return PortRow.failed_call(legacy, ported, **fields)
    a, b = legacy[1], ported[1]
    if a is None or b is None:
        return PortRow.unconnected(a, b, **fields)
    rtol_d, atol_d = tolerance(a.dtype, b.dtype, rtol, atol)
    return PortRow(**fields, **compare_values(a, b, rtol_d, atol_d), rtol=rtol_d, atol=atol_d)

