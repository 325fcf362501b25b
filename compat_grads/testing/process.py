"""The TF1 worker process: a second Python process that runs work for this one.

`compat-grads check` runs the matrix's TF1 routes (or the Keras model items) there, with v2
behaviour disabled, and for larger runs a second one shares its TF2 routes; `compare_port`,
the pytest plugin's "tf1" mode and the TF1 harness call functions there
(`compat_grads.testing.remote`). Both sides of the pipe live here: `WorkerProcess` starts
and talks to the process, and `main` is the process (`python -m
compat_grads.testing.process OUT [--work PICKLE] [--tf2]`).

The child reads lines from stdin and runs each as it arrives. With `--work`, a pickled
`work()` from the caller (`checks.matrix_work`, `models.model_work`: the child imports it by
name, so this module knows no matrix) gives ({item id: item}, item -> result): the lines are
item ids, the child prints `done <item id>` after each and pickles {item id: result} to OUT
at the end of its input. Without it, the lines are requests `call <sys.path> <job>` (base64
pickles), each answered with a line `returned <value>` or `raised <error>`. Without `--tf2`
the child disables v2 behaviour first; with it, it shares the TF2 side's work.
"""

from __future__ import annotations

import argparse
import base64
import os
import pickle
import queue
import re
import subprocess
import sys
import tempfile
import threading
import traceback

from compat_grads._src.console.quiet import NATIVE_LOG


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
    """Items run in a process of its own while this one does other work: on the TF1 routes
    with v2 behaviour disabled there, or with `tf2` on TF2 routes, to share the TF2 work.

    `work` is a picklable `work() -> ({item id: item}, item -> result)` for the child to run
    (see the module doc); `label` says what it runs, in `name` and errors. `send(ids)` hands
    it items (it runs them in that order); `close_input()` says there are no more;
    `results()` waits and returns {item id: result}. `on_item(item_id)` is called from a
    reader thread as each item finishes. Without `work` it runs functions in a TF1 graph
    process instead (`compat_grads.testing.remote`): `call(line)` sends one request and
    returns its reply. Use it as a context manager: leaving the block, normally or by an
    exception (Ctrl-C included), stops the process, so no worker outlives its caller.
    """

    def __init__(self, work=None, *, label="", tf2=False, on_item=None):
        side = "the TF2 routes" if tf2 else "the TF1 graph routes"
        self.name = "the TF1 worker process" if work is None else f"{side} ({label})"
        self._folder = tempfile.TemporaryDirectory()
        self._out = os.path.join(self._folder.name, "results.pickle")
        command = [sys.executable, "-m", __name__, self._out, *(["--tf2"] if tf2 else []),
                   *([] if work is None else ["--work", encode(pickle.dumps(work))])]
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


def run_tf1_process(ids, work, label, timeout=1800) -> dict:
    """Runs the items `ids` with `work` (see `WorkerProcess`) in a new process with v2
    behaviour disabled, and waits for it.

    Returns {item id: result}. Raises WorkerError with the worker's output if it fails,
    subprocess.TimeoutExpired if it runs past `timeout` seconds.
    """
    with WorkerProcess(work, label=label) as process:
        process.send(ids)
        return process.results(timeout)


def encode(data: bytes) -> str:
    """`data` as one line of text (base64), as requests and replies travel."""
    return base64.b64encode(data).decode("ascii")


def decode(text: str) -> bytes:
    return base64.b64decode(text)


# ------------------------------------------------------------------------ the child's side


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("out")
    parser.add_argument("--work")
    parser.add_argument("--tf2", action="store_true")
    args = parser.parse_args(argv)
    from compat_grads._src.core.tf import tf

    tf.get_logger().setLevel("ERROR")
    if not args.tf2:
        tf.compat.v1.disable_v2_behavior()
    if args.work is None:
        serve_calls(sys.stdin)
    else:
        _serve_items(*pickle.loads(decode(args.work))(), sys.stdin, args.out)
    return 0


def _serve_items(by_id, run, lines, out) -> None:
    results = {}
    for line in lines:
        if not line.strip():
            continue
        item = by_id[line.strip()]
        results[item.id] = run(item)
        print("done", item.id, flush=True)
    with open(out, "wb") as handle:
        pickle.dump(results, handle)


def serve_calls(requests) -> None:
    """Runs each request line of `requests` and writes its reply line.

    What the functions print goes to stderr, so it cannot break the replies on stdout."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in requests:
        if line.strip():
            kind, payload = _run_call(*line.split()[1:])
            replies.write(f"{kind} {encode(payload)}\n")
            replies.flush()


def _run_call(path, request):
    sys.path[:0] = [p for p in pickle.loads(decode(path)) if p not in sys.path]
    try:
        job, args, kwargs = pickle.loads(decode(request))
        return "returned", pickle.dumps(job(*args, **kwargs))
    except Exception as error:
        return "raised", pickle.dumps((_picklable(error), type(error).__qualname__,
                                       str(error), traceback.format_exc()))


def _picklable(error):
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
