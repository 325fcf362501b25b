"""How much longer TensorFlow's own call of a small compiled function takes when Python runs
just before it: the concrete function compat_grads runs for `per_element_gradients` on a
3-vector, called directly (`_call_flat`, the per-call workloads' floor), alone and after a
spin of 5 to 100 µs of Python, timed as the bench times (`timing.interleaved_ms`: side by
side, the median of samples). The per-call workloads compare our call with that call back
to back; this shows why their difference is larger than our Python.

    python benchmarks/idle_gap.py            # 3 runs of 100 rounds
    python benchmarks/idle_gap.py RUNS ROUNDS

Run it with TF_ENABLE_ONEDNN_OPTS=0, as the bench does.
"""

from __future__ import annotations

import sys
import time

SPINS_US = (0, 5, 10, 20, 100)


def _floor():
    """The flat call of the concrete function our compiled call runs, and our call."""
    import compat_grads as cg
    from compat_grads._src.core.tf import tf
    from compat_grads.bench.per_call import compiled_for

    x = tf.constant([0.5, -1.0, 2.0])

    def ours():
        return cg.per_element_gradients(tf.sin, x)
    _, concrete = compiled_for(ours)
    flat, captured = [x], concrete.captured_inputs
    return lambda: concrete._call_flat(flat, captured), ours


def _after(spin_us, call):
    clock = time.perf_counter_ns

    def spun():
        end = clock() + spin_us * 1000
        while clock() < end:
            pass
        return call()
    return spun


def main(argv) -> int:
    from compat_grads.bench import timing

    runs = int(argv[0]) if argv else 3
    rounds = int(argv[1]) if len(argv) > 1 else 100
    call, ours = _floor()
    recipes = {spin: _after(spin, call) if spin else call for spin in SPINS_US}
    recipes["ours"] = ours
    print("| run | " + " | ".join(f"call after {s} µs of Python: µs (more than the spin)"
                                   for s in SPINS_US) + " | our call |")
    print("|---" * (len(SPINS_US) + 2) + "|")
    for run in range(runs):
        us = {name: ms * 1e3 for name, ms in timing.interleaved_ms(recipes, rounds).items()}
        cells = [f"{us[0]:.1f}"] + [f"{us[s]:.1f} (+{us[s] - us[0] - s:.1f})"
                                    for s in SPINS_US[1:]]
        print(f"| {run + 1} | " + " | ".join(cells) + f" | {us['ours']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
