"""The options of the public functions: checked strictly, once, before anything else runs.

The call path (`compat_grads._src.call.run`) calls `check` first, before the eager cache builds its
key
from the options (an unhashable option would otherwise fail there with TensorFlow's or Python's
words, not ours) and before anything is built or run. A value of the wrong type is a
`TypeError`, a value of the right type that is not allowed a `ValueError`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.how import How
from compat_grads._src.core.tf import tf
from compat_grads._src.core.variables import unwrap_variable
from compat_grads._src.memory import AUTO, check_budget

STRATEGIES = ("auto", "reverse", "forward", "loop")
UNCONNECTED = ("none", "zero")
METHODS = ("exact", "hutchinson")
DEFAULT_PROBES = 64
"""Hutchinson probes when `num_samples` is not given."""

MAX_BYTES = 16 * 2**30
"""The default `max_bytes`: 16 GiB. A fixed number, not a share of this machine's memory, so
that a call behaves the same on every machine (a graph may be built on one and run on
another, or on a GPU whose memory is not the host's) and in the TF1 and TF2 processes of a
port. It is far above any Jacobian a workstation computes in practice and far below the
sizes that are plainly a mistake (a Jacobian between two 200000-vectors is 160 GB):
TensorFlow would only fail on those after a long run, with `ResourceExhaustedError`."""


@dataclasses.dataclass(frozen=True)
class Estimator:
    """How a trace or a diagonal is computed: "exact", or Hutchinson's estimate from
    `num_samples` Rademacher probes drawn from the stateless `seed` (the same probes, so the
    same estimate, on every route); `return_std` adds the estimate's standard error."""

    method: str = "exact"
    num_samples: int | None = None
    seed: int = 0
    return_std: bool = False

    @property
    def probes(self) -> int:
        return self.num_samples or DEFAULT_PROBES


REDUCTIONS = ("sum", "mean")


@dataclasses.dataclass(frozen=True)
class Clipping:
    """How `clipped_gradients` clips and noises: each example's gradient scaled to an L2
    norm of at most `l2_norm_clip`, the sum noised with `noise_multiplier * l2_norm_clip`
    per element from the stateless `seed` (the same noise on every route), divided by the
    batch size with `reduction="mean"`; `return_norms` adds the norms, `per_weight` gives
    `per_example_gradient_norms` one norm per weight."""

    l2_norm_clip: float | None = None
    noise_multiplier: float = 0.0
    seed: int | None = None
    reduction: str = "sum"
    return_norms: bool = False
    per_weight: bool = False

    @property
    def noised(self) -> bool:
        return self.noise_multiplier > 0


@dataclasses.dataclass(frozen=True)
class Options:
    """A public call's checked options: `how` for the math, the rest for the call path
    (`compat_grads._src.call.run`). Immutable, so a piece of a `distribute=` split or a compiled
    function sees the options the call was checked with."""

    how: How = How()
    tape: tf.GradientTape | None = None
    independent: bool = True
    loss_fn: object = None
    compile: bool = True
    jit_compile: bool = False
    distribute: object = None
    gather: bool = True
    has_aux: bool = False
    return_value: bool = False
    flat: bool = False
    estimator: Estimator = Estimator()
    clipping: Clipping = Clipping()

    @property
    def valued(self) -> bool:
        """Whether the result carries the value or aux besides the derivative."""
        return self.has_aux or self.return_value

    def cache_key(self, function: str) -> tuple:
        """What the compile cache tells the compiled functions of `function` apart by: every
        option that changes what is traced (`tape` and `compile` are never set there, and
        `jit_compile` is the cache's own; a seed that is an input instead is 0 here: a new
        seed, no new trace). A budget of 1 byte is not the share 1.0, and a list of devices
        is a tuple."""
        distribute = (tuple(self.distribute) if isinstance(self.distribute, list)
                      else self.distribute)
        return (function, self.how, type(self.how.memory_budget), self.independent,
                self.loss_fn, distribute, self.gather, self.has_aux, self.return_value,
                self.flat, self.estimator, self.clipping)


_PLAIN = frozenset((bool, int, float, str, type(None)))
"""The types of option values whose checked `Options` are remembered (`_CHECKED`)."""
_CHECKED: dict = {}
"""(function, (name, type, value) of each option) -> its `Options`, for calls whose options
are all plain Python values: a training loop calls with the same few options every step,
and checking them again would be a tenth of a small compiled call's time. The type is in
the key because True == 1 and 1 == 1.0 would otherwise share an entry."""


def check(function: str, **given) -> Options:
    """The `Options` of a public call: `compile` and `jit_compile` checked to be bools, then
    the function's own options in their order (the enum to its string, numpy integers to
    int). `distribute` and `gather` are checked by `compat_grads._src.call.distribute.check` when
    `distribute` is given. Options that were all plain values before come from `_CHECKED`."""
    if not all(type(value) in _PLAIN for value in given.values()):
        return _checked(function, **given)
    key = (function, *((name, type(value), value) for name, value in given.items()))
    options = _CHECKED.get(key)
    if options is None:
        options = _checked(function, **given)  # raises before anything is remembered
        if len(_CHECKED) >= 1024:  # option values that change from call to call
            _CHECKED.clear()
        _CHECKED[key] = options
    return options


def _checked(function: str, *, compile, jit_compile, distribute=None, gather=True,
             **options) -> Options:
    flags = [_check_bool(function, name, value)
             for name, value in (("compile", compile), ("jit_compile", jit_compile))]
    checked = {name: _CHECKS[name](function, name, value) for name, value in options.items()}
    how = How(checked.get("strategy", "auto"), checked.get("unconnected_gradients", "none"),
              checked.get("chunk_size", AUTO if "chunk_size" in options else None),
              checked.get("max_bytes"),
              memory_budget=checked.get("memory_budget"))
    return Options(how, checked.get("tape"), checked.get("independent", True),
                   checked.get("loss_fn"), *flags, distribute, gather,
                   checked.get("has_aux", False), checked.get("return_value", False),
                   checked.get("flat", False), _estimator(function, checked),
                   _clipping(function, checked))


def _estimator(function, checked) -> Estimator:
    """The checked estimator options, with the rules between them: probes only for an
    estimate, a standard error from at least two of them."""
    estimator = Estimator(checked.get("method", "exact"), checked.get("num_samples"),
                          checked.get("seed", 0), checked.get("return_std", False))
    if estimator.method == "exact":
        for name, given in (("num_samples", estimator.num_samples is not None),
                            ("return_std", estimator.return_std)):
            if given:
                raise ValueError(message(
                    function, f"{name}= needs method='hutchinson' (an estimate), but "
                    "method='exact' computes the exact value", f"Drop {name}=, or pass "
                    "method='hutchinson' to estimate it from random probes."))
    elif estimator.return_std and estimator.probes < 2:
        raise ValueError(message(
            function, "return_std=True needs num_samples of at least 2 (a standard error "
            "from one probe is undefined), but got num_samples=1",
            "Pass num_samples=2 or more, or drop return_std=."))
    return estimator


def _clipping(function, checked) -> Clipping:
    """The checked clipping options, with the rule between them: noise needs a seed."""
    clipping = Clipping(checked.get("l2_norm_clip"), checked.get("noise_multiplier", 0.0),
                        checked.get("noise_seed"), checked.get("reduction", "sum"),
                        checked.get("return_norms", False), checked.get("per_weight", False))
    if clipping.noised and clipping.seed is None:
        raise ValueError(message(
            function, f"noise_multiplier={clipping.noise_multiplier} needs seed= (an int), "
            "but got seed=None", "Pass seed= a new int each step (the noise comes from a "
            "stateless generator: one seed gives the same noise on every route, and a "
            "repeated seed repeats the noise), or noise_multiplier=0 for no noise."))
    return clipping


def _check_number(positive):
    """A real number (an int or a float, not a bool): positive, or at least 0."""
    wanted = "a positive number" if positive else "a number >= 0"

    def check_one(function, name, value):
        fix = (f"Pass {name}= as a Python float, e.g. {name}=1.0." if positive else
               f"Pass {name}= as a Python float, e.g. {name}=1.1 (0 for no noise).")
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError(message(function, f"{name} must be {wanted}, but got "
                                    f"{_shown(value)}", fix))
        if not np.isfinite(value) or value < 0 or (positive and value == 0):
            raise ValueError(message(function, f"{name} must be {wanted}, but got {value!r}",
                                     fix))
        return float(value)
    return check_one


def _check_noise_seed(function, name, value):
    """None, an int, or (a step counter in a compiled training step) an integer scalar
    tensor or variable."""
    if value is None:
        return None
    value = unwrap_variable(value)  # a Keras 3 step counter
    if isinstance(value, (tf.Tensor, tf.Variable)):
        dtype = tf.as_dtype(value.dtype)
        if not dtype.is_integer or value.shape.rank not in (0, None):
            raise TypeError(message(
                function, f"seed must be an int or an integer scalar tensor, but got "
                f"{describe(value)}", "Pass seed= a Python int, or in a compiled training "
                "step a counter that changes every step (optimizer.iterations)."))
        return value
    return _check_seed(function, "seed", value)


def _check_bool(function, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(message(
            function, f"{name} must be a bool (True or False), but got {_shown(value)}",
            f"Pass {name}=True or {name}=False (a string such as 'False' would count as "
            "true)."))
    return bool(value)


def _check_choice(choices, wanted, fix):
    def check_one(function, name, value):
        value = getattr(value, "value", value) if name == "unconnected_gradients" else value
        if not isinstance(value, str):
            raise TypeError(message(
                function, f"{name} must be {wanted}, but got {_shown(value)}", fix))
        if value not in choices:
            raise ValueError(message(
                function, f"{name} must be {wanted}, but got {value!r}", fix))
        return value
    return check_one


def _check_count(what):
    def check_one(function, name, value):
        if value is None:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(message(
                function, f"{name} must be a positive integer or None, but got "
                f"{_shown(value)}", f"Pass {what} as a Python int (or None)."))
        if value < 1:
            raise ValueError(message(
                function, f"{name} must be a positive integer or None, but got {value!r}",
                f"Pass {what} (at least 1), or None."))
        return int(value)
    return check_one


def _check_chunk(function, name, value):
    """"auto", None or a positive int."""
    wanted = "'auto', None or a positive int"
    fix = ("Pass chunk_size='auto' (the default: every row at once when that fits the memory "
           "budget, else the largest chunk that does), None (every row at once) or a Python "
           "int (at most that many rows, or columns, in flight at once).")
    if value is None or value == AUTO:
        return value
    if isinstance(value, str):
        raise ValueError(message(function, f"chunk_size must be {wanted}, but got {value!r}",
                                 fix))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(message(function, f"chunk_size must be {wanted}, but got "
                                f"{_shown(value)}", fix))
    if value < 1:
        raise ValueError(message(function, f"chunk_size must be {wanted}, but got {value!r}",
                                 fix))
    return int(value)


def _check_seed(function, name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(message(
            function, f"seed must be a Python int, but got {_shown(value)}",
            "Pass an int such as seed=0: the probes (or the noise) come from a stateless "
            "generator, so one seed gives the same numbers on every route (a tensor or a "
            "tf.random Generator would not)."))
    if not -2**63 <= value < 2**63:
        raise ValueError(message(function, f"seed must fit in 64 bits, but got {value}",
                                 "Pass a smaller int."))
    return int(value)


def _check_tape(function, name, value):
    if value is not None and not isinstance(value, tf.GradientTape):
        raise TypeError(message(
            function, f"tape must be a tf.GradientTape, but got {describe(value)}",
            "Pass the GradientTape that recorded the target, or pass a callable target."))
    return value


def _check_callable(function, name, value):
    if not callable(value):
        raise TypeError(message(
            function, f"{name} must be callable as {name}(y_true, y_pred), but got "
            f"{describe(value)}", "Pass a loss function that returns one loss per example, "
            "e.g. tf.keras.losses.MeanSquaredError(reduction='none')."))
    return value


def _listed(choices) -> str:
    return ", ".join(map(repr, choices))


def _shown(value) -> str:
    """The value's type and, when it is short, the value itself: `str 'False'`."""
    text = repr(value)
    return describe(value) + (f" {text}" if len(text) <= 40 else "")


_CHECKS = {
    "strategy": _check_choice(
        STRATEGIES, f"one of {_listed(STRATEGIES)}",
        "Use 'auto' unless you need a specific direction (one string, not a list)."),
    "unconnected_gradients": _check_choice(
        UNCONNECTED, f"{_listed(UNCONNECTED)} or a tf.UnconnectedGradients",
        "Use 'none' to get None for sources the target does not depend on, 'zero' for "
        "zeros."),
    "chunk_size": _check_chunk,
    "memory_budget": check_budget,
    "max_bytes": _check_count("the most memory, in bytes, the result and the rows in "
                              "flight may take"),
    "method": _check_choice(
        METHODS, f"one of {_listed(METHODS)}",
        "Use 'exact' (the default) or 'hutchinson' for a random estimate."),
    "num_samples": _check_count("how many random probes the estimate averages"),
    "seed": _check_seed,
    "return_std": _check_bool,
    "independent": _check_bool,
    "has_aux": _check_bool,
    "return_value": _check_bool,
    "flat": _check_bool,
    "tape": _check_tape,
    "l2_norm_clip": _check_number(positive=True),
    "noise_multiplier": _check_number(positive=False),
    "noise_seed": _check_noise_seed,
    "reduction": _check_choice(REDUCTIONS, f"one of {_listed(REDUCTIONS)}",
                               "Use 'sum' (the sum of the clipped gradients, as DP-SGD "
                               "noises it) or 'mean' (divided by the batch size)."),
    "return_norms": _check_bool,
    "per_weight": _check_bool,
    "loss_fn": _check_callable,
}
