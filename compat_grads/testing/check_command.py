"""`compat-grads check`: run the shared matrix (or the Keras model matrix) on this machine's
TensorFlow, the TF1 graph routes in a spawned process (`compat_grads.testing.process`) while
this one runs the TF2 routes (eager, tf.function, v1 Graph), and print how they compare."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from compat_grads._src.console import progress as _progress

HEADER = ("case", "function", "shape", "max |route diff|", "max err vs oracle", "verdict")

QUICK_DOC = ("every case, strategy, unconnected mode, chunk_size and independent=False at "
             "least once, every function in every mode")
"""The quick check's rule in a line, for `compat-grads check --help`."""


def run(args, started: float) -> int:
    """`compat-grads check` with the parsed `args`, TensorFlow already imported; `started`
    is when the command began (for the summary's time). Returns the exit status."""
    from compat_grads._src.core.tf import tf

    tf.get_logger().setLevel("ERROR")  # the matrix retraces on purpose; keep the output clean
    try:
        kind = _models_kind() if args.models else _matrix_kind(args.strict_bitwise)
    except ImportError as err:  # the model matrix needs Keras 2 (tf_keras from TF 2.16)
        print(f"compat-grads check: {err}", file=sys.stderr)
        return 2
    with _terminate_as_exit():
        try:
            return _check(kind, args, started)
        except KeyboardInterrupt:
            print("compat-grads check: interrupted; its worker processes were stopped.",
                  file=sys.stderr)
            _end_now(130)
        except SystemExit as stop:  # SIGTERM
            _end_now(stop.code)


@dataclasses.dataclass(frozen=True)
class _Kind:
    """What `compat-grads check` runs: the shared matrix or the Keras model matrix."""

    name: str
    items: Callable  # pattern -> items
    quick: Callable  # items -> the quick check's items
    rule: str
    plan: Callable  # (items, full) -> {item id: its routes}, or None: every route
    tf1_worker: Callable  # plan -> process.WorkerProcess options for the TF1 side
    tf2_worker: Callable  # plan -> ... for a second process on the TF2 side
    run_here: Callable  # (item, plan) -> what the TF2 routes gave
    record: Callable  # (item, run_here's result, TF1 result) -> record


def _matrix_kind(bitwise) -> _Kind:
    from compat_grads.testing import checks, matrix, modes, routes

    if bitwise:
        from compat_grads.testing import tolerances

        tolerances.pin_runtime_for_bitwise()
    return _Kind("matrix", matrix.items, matrix.quick, matrix.QUICK_RULE, _matrix_plan,
                 lambda plan: _matrix_worker(routes.TF1_ROUTES, plan, bitwise),
                 lambda plan: {**_matrix_worker(routes.TF2_ROUTES, plan, bitwise), "tf2": True},
                 lambda item, plan: checks.run_routes(
                     item, _planned(routes.TF2_ROUTES, plan, item.id)),
                 lambda item, here, tf1: _record(item, *checks.judge(
                     item, {**here, **tf1}, modes.route(modes.TF1, "tensor"), bitwise)))


def _matrix_plan(items, full):
    """The quick check runs each item on the TF1 graph and in one TF2 mode by turns
    (`matrix.check_plan`); `--full` runs every route."""
    from compat_grads.testing import matrix, routes

    return None if full else matrix.check_plan(items, routes.TF1_ROUTES + routes.TF2_ROUTES)


def _planned(routes, plan, item_id) -> tuple:
    """The routes of `routes` that `plan` gives the item `item_id` (all with no plan)."""
    return tuple(routes) if plan is None else tuple(r for r in routes if r in plan[item_id])


def _matrix_worker(routes, plan, bitwise) -> dict:
    side = None if plan is None else {i: _planned(routes, plan, i) for i in plan}
    return {"work": functools.partial(planned_work, tuple(routes), side, bitwise),
            "label": ", ".join(routes)}


def planned_work(routes, plan, bitwise=False):
    """A worker process's `work` (`checks.matrix_work`) that runs each item on its routes
    in `plan` ({item id: routes}; every one of `routes` with None)."""
    from compat_grads.testing import checks

    by_id, run = checks.matrix_work(routes, bitwise)
    if plan is None:
        return by_id, run
    return by_id, lambda item: checks.run_routes(item, plan[item.id])


def _models_kind() -> _Kind:
    from compat_grads._src.core.tf import keras2
    from compat_grads.testing import models, modes

    keras2()  # fails here, with the fix, when this release's Keras 2 is not installed
    return _Kind("model", models.items, models.quick, models.QUICK_RULE,
                 lambda items, full: None,
                 lambda plan: {"work": models.model_work, "label": models.WORKER_LABEL},
                 lambda plan: {"work": functools.partial(models.model_work, True),
                               "label": models.WORKER_LABEL, "tf2": True},
                 lambda item, plan: models.evaluate(item),
                 lambda item, here, tf1: _record(item, *models.judge(
                     item, here[0], {**here[1], modes.TF1: tf1})))


def _check(kind: _Kind, args, started: float) -> int:
    """Runs the TF1 process and the TF2 routes at the same time, then compares; prints the
    table (or JSON) and returns the exit status: 0 all agree, 1 a mismatch, 2 no item
    matches or a worker process failed."""
    from compat_grads._src.core.tf import tensorflow_distributions, tf, two_tensorflows_advice
    from compat_grads.testing.process import WorkerError

    distributions = tensorflow_distributions()
    advice = two_tensorflows_advice(distributions)
    if advice:
        print(f"compat-grads check: warning: {advice}", file=sys.stderr)
    matching = kind.items(args.pattern)
    if not matching:
        print(f"compat-grads check: no {kind.name} item matches -k {args.pattern!r}",
              file=sys.stderr)
        return 2
    items = matching if args.full else kind.quick(matching)
    scope = (f"full check of all {len(items)} items" if args.full else
             f"quick check; --full for all {len(matching)} items")
    if not args.quiet:
        what = (f"full check of all {len(items)} {kind.name} items" if args.full else
                f"quick check of {len(items)} of {len(matching)} {kind.name} items: "
                f"{kind.rule} (--full runs all)")
        print(f"compat-grads check: TensorFlow {tf.__version__}, {what}; the TF1 graph routes "
              f"run in a second process meanwhile.", file=sys.stderr)
    try:
        here, tf1 = _run_both_sides(kind, items, args)
    except WorkerError as err:
        print(f"compat-grads check: {err.name} failed in its process: {err.first_line}",
              file=sys.stderr)
        return 2
    records = [kind.record(item, here[item.id], tf1[item.id]) for item in items]
    rows = _rows(records)
    summary = _summary(rows, time.monotonic() - started, tf.__version__, scope)
    if args.json:
        print(json.dumps({"tensorflow": tf.__version__,
                          "tensorflow_distributions": distributions, "full": args.full,
                          "matching_items": len(matching), "summary": summary,
                          "rows": rows, "items": records}, indent=1))
        if not args.quiet:
            print(summary, file=sys.stderr)
    else:
        print(_table(rows) + "\n" + summary)
    return 1 if any(row["verdict"] != "ok" for row in rows) else 0


SHARE_FROM = 8
"""From this many items on, a second process can share the TF2 routes' work (below it, its
start costs more than it saves)."""


def _share(items, plan) -> bool:
    """Whether a second process shares the TF2 routes' work: when the run has SHARE_FROM
    items or more and the TF2 side runs at least twice the TF1 side's routes (every route:
    no `plan`). Its start (importing TensorFlow, about 6 s of a core) costs more than it
    saves when both sides run about as much, as the quick check's do: one route each."""
    if len(items) < SHARE_FROM:
        return False
    if plan is None:
        return True
    from compat_grads.testing.modes import TF1

    runs = [route.startswith(f"{TF1}.") for item in items for route in plan[item.id]]
    return len(runs) - sum(runs) >= 2 * sum(runs)


def _run_both_sides(kind: _Kind, items, args):
    """({item id: TF2 result}, {item id: TF1 result}), each item on its routes in the kind's
    plan: the TF1 process runs meanwhile and, where it pays (`_share`), a second TF2 process
    takes items from the back of the queue while this one takes them from the front. Stops
    early when a worker fails."""
    from compat_grads.testing.process import WorkerProcess

    by_id = {item.id: item for item in items}
    queue = collections.deque(by_id)
    with contextlib.ExitStack() as stack:
        progress = stack.enter_context(_progress.Progress(
            "compat-grads check", {"TF1": len(items), "TF2": len(items)}, sys.stderr,
            enabled=not args.quiet, interval=args.heartbeat))
        plan = kind.plan(items, args.full)
        tf1 = stack.enter_context(WorkerProcess(
            **kind.tf1_worker(plan), on_item=lambda item_id: progress.advance("TF1", item_id)))
        tf1.send(by_id)
        workers = [tf1]
        if _share(items, plan):
            def helper_done(item_id):
                progress.advance("TF2", item_id)
                _hand_next(queue, helper)
            helper = stack.enter_context(WorkerProcess(**kind.tf2_worker(plan),
                                                       on_item=helper_done))
            _hand_next(queue, helper)
            workers.append(helper)
        here = {}

        def run_here():
            while queue and not any(worker.failed for worker in workers):
                item_id = queue.popleft()
                progress.show(item_id)
                here[item_id] = kind.run_here(by_id[item_id], plan)
                progress.advance("TF2", item_id)
        _in_thread(run_here)
        results = [worker.results() for worker in workers]
        for shared in results[1:]:
            here.update(shared)
        return here, results[0]


def _in_thread(work) -> None:
    """Runs `work()` in a daemon thread while this one waits for it, and raises what it
    raised. Ctrl-C and SIGTERM are handled by the main thread, which TensorFlow can hold
    for a minute inside one native call on a busy machine; waiting here, it stops the
    worker processes at once. `run` then ends the process, the thread with it."""
    failed = []

    def target():
        try:
            work()
        except BaseException as error:  # handed to the waiting thread
            failed.append(error)
    thread = threading.Thread(target=target, name="compat-grads-check", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
    if failed:
        raise failed[0]


def _hand_next(queue, worker):
    """Gives `worker` the item at the back of `queue`, or closes its input when none is
    left."""
    try:
        worker.send([queue.pop()])
    except IndexError:
        worker.close_input()


def _end_now(status) -> None:
    """Ends an interrupted check at once with `status`: its worker processes are stopped
    and the output flushed, and the thread that ran the TF2 side may still be inside
    TensorFlow, whose thread-exit code must not race the interpreter's shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (a CI time-out, `kill`) ends the check like Ctrl-C does: through the
    with-blocks that stop the TF1 process, so it never outlives the check."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _record(item, problems, results, oracle_error, route_difference):
    from compat_grads.testing import matrix

    def derivative(route, values):  # the matrix's items return the value (and aux) too
        if not isinstance(item, matrix.Item):
            return values
        return matrix.derivative_values(item.function, route, values)

    shapes = sorted({", ".join("None" if v is None else str(tuple(v.shape))
                               for v in derivative(route, r.values))
                     for route, r in results.items() if not r.error})
    return {"id": item.id, "case": item.case.name, "function": item.function,
            "strategy": item.strategy, "unconnected": item.unconnected,
            "flat": getattr(item, "flat", False),
            "routes": sorted(results), "shapes": shapes, "oracle_error": oracle_error,
            "route_difference": route_difference, "problems": problems}


def _rows(records):
    rows = {}
    for rec in records:
        function = rec["function"] + (
            "" if rec["unconnected"] == "none" else f" ({rec['unconnected']})") + (
            " (flat)" if rec.get("flat") else "")
        row = rows.setdefault((rec["case"], function), {
            "case": rec["case"], "function": function, "shapes": set(),
            "route_difference": 0.0, "oracle_error": 0.0, "problems": []})
        row["shapes"].update(rec["shapes"])
        row["route_difference"] = max(row["route_difference"], rec["route_difference"])
        row["oracle_error"] = max(row["oracle_error"], rec["oracle_error"])
        row["problems"] += [f"[{rec['id']}] {p}" for p in rec["problems"]]
    for row in rows.values():
        row["shapes"] = sorted(row["shapes"])
        row["verdict"] = "ok" if not row["problems"] else "MISMATCH"
    return list(rows.values())


def _number(value):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.2e}"


def _table(rows):
    lines = [" | ".join(HEADER), " | ".join("---" for _ in HEADER)]
    for row in rows:
        shape = row["shapes"][0] if len(row["shapes"]) == 1 else "DIFFERENT: " + " / ".join(
            row["shapes"])
        lines.append(" | ".join([row["case"], row["function"], shape,
                                 _number(row["route_difference"]),
                                 _number(row["oracle_error"]), row["verdict"]]))
    bad = [row for row in rows if row["verdict"] != "ok"]
    lines.append("")
    lines += [p for row in bad for p in row["problems"]]
    return "\n".join(lines)


def _summary(rows, seconds, version, scope) -> str:
    """The last line: how many rows agree, in how long, on what, and how much was run."""
    agree = sum(row["verdict"] == "ok" for row in rows)
    line = (f"{agree} of {len(rows)} rows agree across routes and with the oracle in "
            f"{seconds:.0f} s (TensorFlow {version}, {scope})")
    return line + ("" if agree == len(rows) else f"; MISMATCH in {len(rows) - agree}")
