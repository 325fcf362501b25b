"""The measurements behind `compat_grads._src.stacking.cost.GRADIENT_ROWS`: a per-sample Hessian's
few
large rows (`batch_hessian` of a tanh MLP) vectorized or one by one, against nested tapes +
batch_jacobian, each in `tf.function`, in a fresh process and in one that has run other
workloads first (the state of a long-running program, and of the bench's own per-sample
Hessian). `python -m compat_grads.bench.second_order_rows [ROUNDS]` prints one JSON line: a
list of rows (sizes, what the rule reads and decides, ms of each recipe, per state)."""

from __future__ import annotations

import contextlib
import json
import sys

import numpy as np

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import cost as _cost
from compat_grads.bench import timing, workloads

SIZES = [  # (batch, features = rows, hidden width)
    (128, 8, 64), (256, 4, 64), (256, 8, 64), (256, 16, 64), (512, 8, 64), (512, 16, 64),
    (512, 32, 64), (1024, 2, 64), (1024, 4, 64), (1024, 8, 64), (1024, 16, 64),
    (1024, 32, 64), (2048, 8, 64), (4096, 4, 64), (4096, 8, 64), (4096, 16, 64),
    (128, 8, 256), (256, 8, 256), (2048, 8, 16)]
STATES = ("fresh", "used")
MODULE = "compat_grads.bench.second_order_rows"
RULE, ONE_BY_ONE, VECTORIZED, NESTED = (
    "ours (the rule's plan)", "ours, rows one by one (the first-order rule)",
    "ours, rows vectorized (strategy='reverse')", "nested tapes + batch_jacobian")


@contextlib.contextmanager
def _first_order_rule():
    """While tracing: no window for rows through a gradient (the rule before it)."""
    window, _cost.GRADIENT_ROWS = _cost.GRADIENT_ROWS, (float("inf"), 0)
    try:
        yield
    finally:
        _cost.GRADIENT_ROWS = window


def _use():
    """The state after other work: the bench's workloads that run before its Hessians."""
    workloads.matrix_jacobian("tall", 4000, 500, 3)
    workloads.matrix_jacobian("wide", 100, 5000, 3)
    workloads.square_mlp(256, 3)
    workloads.per_element(4000, 500, 3)


def _plan_name(graph) -> str:
    ops = graph.get_operations()
    if any("pfor" in op.name for op in ops):
        return "vectorized"
    return "while_loop" if {op.type for op in ops} & _cost.LOOP_OPS else "separate passes"


def one(batch, features, hidden, state, rounds) -> dict:
    """One size in one state (this process): each recipe's median ms, checked against the
    nested tapes, with the rule's facts and plan."""
    if state == "used":
        _use()
    mlp, _ = workloads._mlp([features, hidden, hidden, 1])
    f = lambda v: tf.squeeze(mlp(v), axis=1)  # noqa: E731
    x = tf.constant(workloads._rng(4).standard_normal((batch, features)).astype(np.float32))
    built = {RULE: tf.function(lambda v: cg.batch_hessian(f, v)),
             ONE_BY_ONE: tf.function(lambda v: cg.batch_hessian(f, v)),
             VECTORIZED: tf.function(lambda v: cg.batch_hessian(f, v, strategy="reverse")),
             NESTED: tf.function(lambda v: workloads._nested_tapes(f, v))}
    plans = {}
    for name, function in built.items():
        with _first_order_rule() if name == ONE_BY_ONE else contextlib.nullcontext():
            plans[name] = _plan_name(function.get_concrete_function(x).graph)
    want = built[NESTED](x).numpy()
    for name, function in built.items():
        np.testing.assert_allclose(function(x).numpy(), want, rtol=1e-3, atol=1e-5,
                                   err_msg=name)
    ms = timing.interleaved_ms({k: (lambda g=g: g(x)) for k, g in built.items()}, rounds)
    largest = batch * hidden * 4
    return {"batch": batch, "features": features, "hidden": hidden, "state": state,
            "largest_kib": largest / 2**10, "together_mib": features * largest / 2**20,
            "plan": plans[RULE], "one_by_one": plans[ONE_BY_ONE], "ms": ms}


def run(rounds=15, sizes=SIZES, states=STATES) -> list:
    """Every size in every state, each in a process of its own."""
    return [timing.in_subprocess(MODULE, ["--one", b, d, h, state, rounds])
            for b, d, h in sizes for state in states]


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--one"]:
        b, d, h, state, rounds = args[1:]
        print(json.dumps(one(int(b), int(d), int(h), state, int(rounds))))
    else:
        print(json.dumps(run(int(args[0]) if args else 15)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
