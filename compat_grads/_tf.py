"""The one import of TensorFlow, with a clear message when it is missing or too old."""

MIN_VERSION = (2, 16)
_INSTALL_HINT = (
    "Install it with the extra that fits your machine: "
    "pip install 'compat_grads[cpu]' (tensorflow-cpu) or pip install 'compat_grads[tf]' "
    "(tensorflow with GPU support)."
)

try:
    import tensorflow as tf
except ImportError as err:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"compat_grads needs TensorFlow >= {MIN_VERSION[0]}.{MIN_VERSION[1]}, but it could "
        f"not be imported ({err}). {_INSTALL_HINT}"
    ) from err


def _version_tuple(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


if _version_tuple(tf.__version__) < MIN_VERSION:  # pragma: no cover - needs an old wheel
    raise ImportError(
        f"compat_grads needs TensorFlow >= {MIN_VERSION[0]}.{MIN_VERSION[1]}, but "
        f"TensorFlow {tf.__version__} is installed. {_INSTALL_HINT}"
    )

__all__ = ["tf", "MIN_VERSION"]
