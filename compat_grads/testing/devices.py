"""Several devices on one CPU: what tests of `tf.distribute` (and `distribute=`) need on a
machine without accelerators."""

from __future__ import annotations

from compat_grads._src.core.errors import message
from compat_grads._src.core.tf import tf


def logical_cpus(count: int) -> list[str]:
    """Splits the first CPU into `count` logical devices and returns their names.

    Call it once per process, before TensorFlow runs its first op (a test suite's
    conftest, or the top of a worker script): TensorFlow fixes its devices then. The
    logical devices share the same cores, so they show how work is split, not a speed-up.

    Raises:
      RuntimeError: when TensorFlow's devices are already fixed with another count.
    """
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:
        have = len(tf.config.list_logical_devices("CPU"))
        if have != count:
            raise RuntimeError(message(
                "testing.logical_cpus", f"TensorFlow's devices are fixed already ({have} "
                f"logical CPUs, {count} wanted): {error}", "Call it before anything "
                "runs a TensorFlow op, once per process.")) from error
    return [f"/cpu:{i}" for i in range(count)]
