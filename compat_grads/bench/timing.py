"""Timing and memory measurement, shared by every workload."""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time

SLOW = 30
"""A function whose call takes more than this many times the fastest one's is timed after
the others (among the slow ones), not interleaved with them."""


_KEEP = [lambda recipe: True]


@contextlib.contextmanager
def only(keep):
    """Inside: the workloads check and time only the recipes `keep(name)` accepts (`kept`)."""
    _KEEP.append(keep)
    try:
        yield
    finally:
        _KEEP.pop()


def kept(recipe: str) -> bool:
    """Whether the workloads check and time `recipe` here (`only`)."""
    return _KEEP[-1](recipe)


def interleaved_ms(fns: dict, repeats: int, sample_s: float = 0.02) -> dict:
    """{name: median milliseconds per call} of the functions in `fns`, measured side by side.

    Each is warmed up (traced) first; then `repeats` rounds time every function once, in a
    new random order each round, so that machine noise, drift and the after-effects of a
    heavy neighbour (freed memory, cold caches) hit all of them alike. A sample repeats a
    fast function enough times to last about `sample_s` seconds.

    The functions more than `SLOW` times slower than the fastest (an eager recipe that
    retraces and allocates for a second per call) are timed after the others, side by side
    among themselves: interleaved, one such call slowed the compiled recipes timed after it
    unevenly (measured: a per-sample Hessian as separate reverse passes from 6.1 to 8.1 ms,
    the same rows vectorized from 6.9 to 7.0 ms), an after-effect that no program which
    does not alternate the two would see.
    """
    calls, seconds = {}, {}
    for name, fn in fns.items():
        _block(fn())
        start = time.perf_counter()
        _block(fn())
        seconds[name] = max(time.perf_counter() - start, 1e-6)
        calls[name] = max(1, int(sample_s / seconds[name]))
    fastest = min(seconds.values(), default=0)
    slow = [name for name in fns if seconds[name] > SLOW * fastest]
    samples = {name: [] for name in fns}
    for group in ([name for name in fns if name not in slow], slow):
        _rounds({name: fns[name] for name in group}, calls, samples, repeats)
    return {name: statistics.median(times) * 1e3 for name, times in samples.items()}


def _rounds(fns, calls, samples, repeats):
    """`repeats` rounds of one sample of each function, in a new random order each round."""
    order = list(fns)
    shuffle = random.Random(0).shuffle
    for _ in range(repeats):
        shuffle(order)
        for name in order:
            fn = fns[name]
            start = time.perf_counter()
            for _ in range(calls[name]):
                _block(fn())
            samples[name].append((time.perf_counter() - start) / calls[name])


def _block(value):
    """Waits for the value without copying it: a read-only view of each eager tensor's
    buffer, which waits for the tensor (session results are numpy already; JAX recipes
    block in their own call). Not `numpy()`, which copies the whole result, a cost that
    no caller of a derivative pays (measured: 0.33 ms for the 8 MB of a per-example CNN
    workload's dense kernel, against 1.4 µs for the view), added to every TensorFlow
    recipe and not to JAX's."""
    for leaf in value if isinstance(value, (list, tuple)) else [value]:
        if hasattr(leaf, "numpy"):
            memoryview(leaf)


def allocator_peak_mb(fn) -> float:
    """The most memory TensorFlow's allocator holds at once during a call of `fn` after the
    first (tracing excluded, as a training loop runs it), over what it held before, in MiB:
    the CPU allocator must be BFC (`TF_CPU_ALLOCATOR_USE_BFC=true` before TensorFlow
    loads), whose statistics count every tensor, as a GPU's do."""
    import tensorflow as tf

    _block(fn())
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    _block(fn())
    return (tf.config.experimental.get_memory_info("CPU:0")["peak"] - before) / 2**20


def rss_mb(field: str = "VmRSS:") -> float:
    """A field of /proc/self/status in MiB (VmRSS: now, VmHWM: the peak since reset)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Resets the peak RSS (VmHWM) of this process (Linux 4.0 and newer)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def in_subprocess(module: str, args: list, timeout: int = 3600, env: dict | None = None) -> dict:
    """Runs `python -m module args...` (with `env` added to the environment) and returns the
    JSON it prints on its last line."""
    done = subprocess.run([sys.executable, "-m", module, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env) if env else None)
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
