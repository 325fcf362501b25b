"""Running the matrix: one item over several routes, and the TF1 side in its own process."""

from __future__ import annotations

import os
import pickle
import queue
import re
import subprocess
import sys
import tempfile
import threading

from compat_grads._quiet import NATIVE_LOG
from compat_grads.testing import compare
from compat_grads.testing.routes import run


def check_item(item, routes, reference=None, extra=None, bitwise=True):
    """Runs `item` on `routes` here and checks every result.

    `extra` holds results from elsewhere (the TF1 process), keyed by route, joined to the
    comparison. Returns (problems, results, oracle error, largest difference to the
    reference route).
    """
    results = run_routes(item, routes)
    results.update(extra or {})
    return judge(item, results, reference, bitwise)


def run_routes(item, routes) -> dict:
    """{route: Result} of `item` on those of `routes` that apply to it, run here."""
    return {route: run(item, route) for route in routes if item.applies(route)}


def judge(item, results, reference=None, bitwise=True):
    """Checks `results` ({route: Result}) against the oracle and each other: see
    `check_item`."""
    results = {r: res for r, res in results.items() if item.applies(r)}
    problems, worst_oracle = [], 0.0
    for route, result in results.items():
        found, error = compare.against_oracle(item, route, result)
        problems += [f"{route}: {p}" for p in found]
        worst_oracle = max(worst_oracle, error) if error == error else worst_oracle
    supported = {r: res for r, res in results.items() if not item.expected_error(r)}
    if reference not in supported:
        reference = next(iter(supported), None)
    found, worst_route = compare.all_between(item, supported, reference, bitwise)
    return problems + found, results, worst_oracle, worst_route


class WorkerError(RuntimeError):
    """A worker process failed: `name` says what it ran, `first_line` is its error in one
    line, `log` the end of what it wrote to stderr."""

    def __init__(self, name, returncode, log):
        self.name, self.returncode, self.log = name, returncode, log
        found = first_error_line(log)
        self.first_line = found or f"exit status {returncode}"
        super().__init__(f"{name} failed in its process (exit status {returncode})"
                         + (f": {found}" if found else "") + f"\n{log[-4000:]}".rstrip())




def without_native_log(log: str) -> list:
    """The non-blank lines of a child's stderr that are not TensorFlow's native log."""
    return [line for line in log.splitlines() if line.strip() and not NATIVE_LOG.match(line)]


def first_error_line(log: str) -> str | None:
    """The line of a child's stderr that says what went wrong: the exception line that ends
    a Python traceback (TensorFlow's own log lines are passed over)."""
    lines = without_native_log(log)
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Interrupt|Exit)\b",
                                                 line)]
    return (errors or lines or [None])[-1]


class WorkerProcess:
    """Items run in a process of its own (`python -m compat_grads.testing.worker`) while
    this one does other work: on the TF1 routes with v2 behaviour disabled there, or with
    `tf2` on TF2 routes, to share the TF2 work.

    `send(ids)` hands it items (it runs them in that order); `close_input()` says there
    are no more; `results()` waits and returns {item id: result}. `on_item(item_id)` is
    called from a reader thread as each item finishes. With `calls` it runs functions in a
    TF1 graph process instead (`compat_grads.testing.remote`): `call(line)` sends one
    request and returns its reply. Use it as a context manager: leaving
    the block, normally or by an exception (Ctrl-C included), stops the process, so no
    worker outlives its caller.
    """

    def __init__(self, routes=(), *, models=False, bitwise=False, tf2=False, calls=False,
                 on_item=None):
        side = "the TF2 routes" if tf2 else "the TF1 graph routes"
        self.name = ("the TF1 worker process" if calls else
                     f"{side} ({', '.join(routes) if routes else 'Keras model items'})")
        self._folder = tempfile.TemporaryDirectory()
        self._out = os.path.join(self._folder.name, "results.pickle")
        command = [sys.executable, "-m", "compat_grads.testing.worker", self._out, *routes,
                   *(["--models"] if models else []), *(["--bitwise"] if bitwise else []),
                   *(["--tf2"] if tf2 else []), *(["--calls"] if calls else [])]
        self._stderr = open(os.path.join(self._folder.name, "stderr.txt"), "w+")
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr, text=True)
        self._input_lock, self._call_lock = threading.Lock(), threading.Lock()
        self._replies = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(on_item,), daemon=True)
        self._reader.start()

    def send(self, ids) -> None:
        with self._input_lock:
            try:
                self._process.stdin.write("".join(f"{i}\n" for i in ids))
                self._process.stdin.flush()
            except (BrokenPipeError, ValueError):  # it has died or is closing: results() says
                pass

    def close_input(self) -> None:
        with self._input_lock:
            try:
                self._process.stdin.close()
            except BrokenPipeError:
                pass

    def _read(self, on_item):
        for line in self._process.stdout:
            if line.startswith("done ") and on_item is not None:
                on_item(line[5:].strip())
            elif line.startswith(("returned ", "raised ")):
                self._replies.put(line.rstrip("\n"))
        self._replies.put(None)

    def call(self, line: str) -> str | None:
        """Sends one request line and waits for its reply line; None when the process ended
        first (then `error()` says why)."""
        with self._call_lock:
            self.send([line])
            return self._replies.get()

    def error(self) -> WorkerError:
        """What went wrong, once the process has ended: its exit status and stderr."""
        returncode = self._process.wait()
        self._stderr.seek(0)
        return WorkerError(self.name, returncode, self._stderr.read())

    @property
    def failed(self) -> bool:
        """The process has ended with an error (checked without waiting)."""
        return self._process.poll() not in (None, 0)

    def results(self, timeout=None) -> dict:
        """Closes the input, waits for the process and returns what it pickled. Raises
        WorkerError if it failed, subprocess.TimeoutExpired (after stopping it) if it ran
        past `timeout`."""
        self.close_input()
        try:
            returncode = self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        self._reader.join()
        if returncode != 0:
            raise self.error()
        with open(self._out, "rb") as handle:
            return pickle.load(handle)

    def stop(self):
        """Kills the process if it still runs, and waits for it."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        self.close_input()
        self._process.stdout.close()
        self._stderr.close()
        self._folder.cleanup()


def run_tf1_process(items, routes, bitwise=False, timeout=1800) -> dict:
    """Runs `items` on TF1 `routes` in a new process with v2 behaviour disabled (and, with
    `bitwise`, the runtime pinned as in `tolerances.pin_runtime_for_bitwise`).

    Returns {item id: {route: Result}}. Raises WorkerError with the worker's output if the
    worker fails.
    """
    with WorkerProcess(routes, bitwise=bitwise) as process:
        process.send(item.id for item in items)
        return process.results(timeout)


def graph_op_counts(function, strategy=None, sizes=(200, 2000, 4000), n=50) -> dict:
    """{m: ops in a graph holding `function(tanh(W @ x), x)`}, W an (m, n) placeholder.

    Builds in a new graph (a TF1 graph in a TF1 process, a v1 Graph inside TF2 otherwise),
    to show that the graph does not grow with the number m of target elements.
    """
    from compat_grads._tf import tf

    counts = {}
    for m in sizes:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [n])
            w = tf.compat.v1.placeholder(tf.float32, [m, n])
            kwargs = {} if strategy is None else {"strategy": strategy}
            function(tf.tanh(tf.linalg.matvec(w, x)), x, **kwargs)
        counts[m] = len(graph.get_operations())
    return counts


def assert_flat_graph(function, strategy=None):
    """Asserts the graph of `function` does not grow with the number of target elements."""
    counts = graph_op_counts(function, strategy)
    assert counts[2000] == counts[4000], counts
    # tf.zeros folds shapes under 1000 elements into one Const instead of a Fill: a constant
    # difference, not growth.
    assert abs(counts[200] - counts[4000]) <= 4, counts


def independence_errors(route):
    """{(function, independent): error vs the oracle} for the coupled-samples case on
    `route`: the default (independent=True) is wrong there, independent=False is right."""
    from compat_grads.testing import cases, compare, matrix

    case = cases.get("coupled_samples")
    errors = {}
    for function in ("batch_jacobian", "batch_hessian"):
        for independent in (True, False):
            item = matrix.Item(case, function, "auto", "none", independent)
            result = run(item, route)
            if result.error:
                raise AssertionError(f"{item} on {route}: {result.error}")
            errors[function, independent] = compare.against_oracle(item, route, result)[1]
    return errors


def hvp_against_hessian(case, mode):
    """Max scaled difference between `hvp(f, x, v)` and `hessian(f, x) @ v` for the scalar
    `f = sum(w * target)` (w fixed) of `case`, run in `mode`: "graph" (a Session in a new
    graph: TF1 in a TF1 process), "function" or "eager"."""
    import numpy as np

    import compat_grads as cg
    from compat_grads._tf import tf
    from compat_grads.testing import tolerances

    sources, consts = case.inputs()
    tangents, weight = case.directions()
    dtype = tf.as_dtype(case.dtype)

    def both(xs, v, cs):
        def f(s):
            y = tf.cast(case.build(s, cs), tf.float64)
            return tf.reduce_sum(y * tf.constant(weight, tf.float64))
        return cg.hessian(f, xs, unconnected_gradients="zero"), cg.hvp(f, xs, v)

    def tensors():
        convert = lambda a: tf.constant(a, dtype)  # noqa: E731
        return (case.repeated(tf.nest.map_structure(convert, sources)),
                tf.nest.map_structure(convert, tangents),
                {k: convert(v) for k, v in consts.items()})

    if mode == "graph":
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            hessian, product = session.run(both(*tensors()))
    else:
        run = tf.function(both) if mode == "function" else both
        hessian, product = tf.nest.map_structure(np.asarray, run(*tensors()))
    flat_h = [np.asarray(h, np.float64) for h in tf.nest.flatten(hessian)]
    flat_v = [np.asarray(v, np.float64) for v in tf.nest.flatten(tangents)]
    worst = 0.0
    for i, got in enumerate(tf.nest.flatten(product)):
        want = sum(np.tensordot(flat_h[i * len(flat_v) + j], v, axes=v.ndim)
                   for j, v in enumerate(flat_v))
        assert np.shape(got) == want.shape, (np.shape(got), want.shape)
        worst = max(worst, tolerances.scaled_error(got, want))
    return worst
