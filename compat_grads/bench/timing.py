"""Timing and memory measurement, shared by every workload."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def median_ms(fn, repeats: int, warmup: int = 2) -> float:
    """Median wall time of `fn()` in milliseconds, after `warmup` untimed calls (traces)."""
    for _ in range(warmup):
        _block(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _block(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _block(value):
    """Waits for the value: numpy() forces eager tensors; session results are numpy."""
    for leaf in value if isinstance(value, (list, tuple)) else [value]:
        if hasattr(leaf, "numpy"):
            leaf.numpy()


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


def in_subprocess(module: str, args: list, timeout: int = 3600) -> dict:
    """Runs `python -m module args...` and returns the JSON it prints on its last line."""
    done = subprocess.run([sys.executable, "-m", module, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
