"""The one import of TensorFlow, with a clear message when it is missing or too old, and the
one place that knows how TensorFlow releases (2.12 to nightly) differ: the rest of the code
asks the functions here, never `tf.__version__`."""

import contextlib
import functools
import importlib
import sys

MIN_VERSION = (2, 12)
_INSTALL_HINT = (
    "Install it with the extra that fits your machine: "
    "pip install 'compat_grads[cpu]' (tensorflow-cpu) or pip install 'compat_grads[tf]' "
    "(tensorflow, which also runs on CPUs and is the one tf-keras requires)."
)


def tensorflow_distributions() -> list[str]:
    """"name version" of each installed distribution that provides the `tensorflow` package,
    without importing it. More than one is a broken install waiting to happen: tf-keras (from
    2.16 on) requires `tensorflow`, so `tensorflow-cpu` beside it makes two; both write the
    same files, and an installer that unpacks wheels side by side (uv) can leave the two
    builds' libraries mixed, which TensorFlow reports as an undefined symbol."""
    from importlib import metadata

    names = sorted(set(metadata.packages_distributions().get("tensorflow", ())))
    return [f"{name} {metadata.version(name)}" for name in names]


def two_tensorflows_advice(distributions: list[str]) -> str:
    """What to do when `distributions` (from `tensorflow_distributions`) holds more than one;
    "" when it holds one or none."""
    if len(distributions) < 2:
        return ""
    names = " ".join(each.split()[0] for each in distributions)
    return (f"{len(distributions)} TensorFlow distributions are installed in this environment "
            f"({', '.join(distributions)}); they write the same files, and an install can "
            f"leave a mix of their libraries. Keep one: pip uninstall -y {names}, then "
            f"pip install 'compat_grads[tf]' (with tf-keras, the keras2 extra, it must be "
            f"`tensorflow`, which tf-keras requires) or 'compat_grads[cpu]' (without tf-keras).")


def _import_failure(err: Exception, distributions: list[str]) -> str:
    """The message of the ImportError raised when `import tensorflow` fails with `err`."""
    advice = two_tensorflows_advice(distributions) or _INSTALL_HINT
    return (f"compat_grads needs TensorFlow >= {MIN_VERSION[0]}.{MIN_VERSION[1]}, but it could "
            f"not be imported ({err}). {advice}")


try:
    import tensorflow as tf
except ImportError as err:  # pragma: no cover - exercised in a subprocess test
    try:
        _installed = tensorflow_distributions()
    except Exception:  # noqa: BLE001 - advice only: the ImportError below must still be raised
        _installed = []
    raise ImportError(_import_failure(err, _installed)) from err


def _version_tuple(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


if _version_tuple(tf.__version__) < MIN_VERSION:  # pragma: no cover - needs an old wheel
    raise ImportError(
        f"compat_grads needs TensorFlow >= {MIN_VERSION[0]}.{MIN_VERSION[1]}, but "
        f"TensorFlow {tf.__version__} is installed. {_INSTALL_HINT}"
    )

# TensorFlow's set of active tapes, as GradientTape itself uses it (private, the same from
# 2.12 to nightly): compat_grads._src.core.tapes asks a tape what it recorded.
from tensorflow.python import pywrap_tfe as _pywrap_tfe  # noqa: E402
from tensorflow.python.eager import tape as _tape_set  # noqa: E402

push_tape, pop_tape = _tape_set.push_tape, _tape_set.pop_tape

# Whether a graph is built for XLA (a tf.function with jit_compile=True traces its body in an
# XLA control-flow context): what tf.function itself asks, private, the same from 2.12 on.
from tensorflow.python.ops import control_flow_util as _control_flow_util  # noqa: E402

graph_in_xla_context = _control_flow_util.GraphOrParentsInXlaContext

# The class of eager tensors (private, the same from 2.12 on), with its `_shape_tuple()` (the
# shape without a TensorShape built) and `_datatype_enum()` (the dtype as an int, without the
# DType looked up): what the compiled call's shortcut keys on (compat_grads._src.call.fast).
from tensorflow.python.framework.ops import EagerTensor  # noqa: E402

# pfor's converters (private, the same from 2.12 on):
# compat_grads._src.stacking.pfor_converters gives a row's convolution ops converters of
# its own (`op.pfor_converter`, which pfor asks before its registry) and hands the cases it does
# not improve to TensorFlow's.
# The module itself: up to 2.15 the package also exports the function `pfor` by that name.
_pfor = importlib.import_module("tensorflow.python.ops.parallel_for.pfor")

pfor_wrap = _pfor.wrap


def pfor_converter_of(row):
    """The pfor converter TensorFlow registers for the type of the op `row` (a
    `_PforInput`) converts; where it registers none (Conv3D and its gradients), pfor's own
    fallback, a while_loop over the rows, with its warning."""
    converter = _pfor._pfor_converter_registry.get(row.op_type)
    if converter is None:
        return functools.partial(
            _pfor._fallback_converter, root_cause="there is no registered converter for "
            "this op.", warn=row.pfor._warn)
    return converter


def called_as_is_by_autograph(function):
    """`function`, marked so that AutoGraph calls it as it is, without a wrapper: the mark
    `tf.autograph.experimental.do_not_convert` puts on its wrapper (private, the same from
    2.12 on). The function must disable AutoGraph itself where it builds a graph (its wrapper
    did that at every call, a tenth of a small compiled call). A release without the mark
    gets the public wrapper."""
    try:
        from tensorflow.python.autograph.impl.api import autograph_artifact
    except ImportError:  # pragma: no cover - depends on the release
        return tf.autograph.experimental.do_not_convert(function)
    return autograph_artifact(function)


def tape_set_records(tensor) -> bool:
    """Whether a tape in this thread's set of active tapes watched `tensor` or recorded the
    op that made it (so it would record an op with `tensor` as input)."""
    return _pywrap_tfe.TFE_Py_TapeSetShouldRecordBackprop([tensor])


RELEASE = _version_tuple(tf.__version__)
KERAS2_BUILT_IN = RELEASE < (2, 16)
"""Up to TensorFlow 2.15 `tf.keras` is Keras 2; from 2.16 it is Keras 3 unless
TF_USE_LEGACY_KERAS=1 makes it the `tf_keras` package."""


def frames_hidden(filenames: frozenset):
    """A context in which the ops made record no Python frame of `filenames` as where they
    were defined (TensorFlow's own frames are left out already): a failing op is reported
    with those frames before its message. A release without the private filter keeps them
    (only the report's length differs)."""
    try:
        from tensorflow.python.util import tf_stack
    except ImportError:  # pragma: no cover - depends on the release
        return contextlib.nullcontext()
    if not hasattr(tf_stack, "StackTraceFilter"):  # pragma: no cover - likewise
        return contextlib.nullcontext()

    class Hidden(tf_stack.StackTraceFilter):
        def get_filtered_filenames(self):
            parent = self.parent.get_filtered_filenames() if self.parent else frozenset()
            return filenames | parent
    return Hidden()


def keras2():
    """Keras 2, the Keras that runs in TF1 graphs: the `keras` package (what `tf.keras` is)
    up to TensorFlow 2.15, the `tf_keras` package from 2.16 on (ImportError with the fix
    when it is missing)."""
    if KERAS2_BUILT_IN:
        # Not `tf.keras`: on 2.15 TF_USE_LEGACY_KERAS=1 sends it to tf_keras, and without
        # tf_keras installed its lazy loader recurses until RecursionError.
        import keras

        return keras
    try:
        import tf_keras
    except ImportError as err:
        raise ImportError(
            f"TensorFlow {tf.__version__}'s Keras 2 is the tf_keras package, but it could not "
            f"be imported ({err}). Install it: pip install 'tf-keras~="
            f"{RELEASE[0]}.{RELEASE[1]}.0'.") from err
    return tf_keras


def is_keras3_class(cls) -> bool:
    """Whether `cls` comes from Keras 3 (package `keras` version 3 or later); up to
    TensorFlow 2.15 package `keras` is Keras 2, which is `tf.keras` itself."""
    package = cls.__module__.split(".")[0]
    if package != "keras":
        return False
    version = getattr(sys.modules.get("keras"), "__version__", "3")
    return _version_tuple(version) >= (3, 0)


__all__ = ["tf", "MIN_VERSION", "RELEASE", "KERAS2_BUILT_IN", "keras2", "is_keras3_class",
           "push_tape", "pop_tape", "tape_set_records", "pfor_wrap", "pfor_converter_of",
           "EagerTensor"]


def op_of(x):
    """The op that makes graph tensor (or graph variable) `x`; None for eager ones."""
    try:
        return x.op
    except (AttributeError, ValueError):
        return None
