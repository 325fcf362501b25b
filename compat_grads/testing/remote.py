"""Calling a function in a TF1 graph process (v2 behaviour disabled) from this one.

One worker process (`compat_grads.testing.process`, with `--calls`) starts on the first
call and serves every later one: `compare_port` runs the legacy side there, and the pytest
plugin's `cg_run` runs its "tf1" mode there. Functions and arguments travel with cloudpickle:
module-level functions by reference (the worker imports them, with this process's
`sys.path`), lambdas and closures by value. What holds TensorFlow or process state (tensors,
variables, graphs, sessions, open files, locks) cannot be sent.
"""

from __future__ import annotations

import atexit
import pickle
import sys
import threading

import cloudpickle

from compat_grads.testing import process
from compat_grads.testing.process import WorkerError, WorkerProcess

_lock = threading.Lock()
_worker: WorkerProcess | None = None


class RemoteTraceback(Exception):
    """The traceback of an exception raised in the worker, attached as its `__cause__`."""

    def __str__(self):
        return "\n" + self.args[0].rstrip()


class RemoteError(RuntimeError):
    """An exception from the worker that could not be sent back as itself."""


def call(job, *args, by_value=(), label=None, **kwargs):
    """`job(*args, **kwargs)` in the TF1 worker; returns its (pickled) result.

    `by_value` names modules whose functions are sent by value instead of by reference
    (a test file the worker should not import); `label` says what runs, in errors (default:
    the job's name). An exception raised by `job` is raised here with its type and message,
    the worker's traceback as its cause. If the worker dies (a crash, `os._exit`), raises
    `WorkerError` with its exit status and the end of its stderr, and the next call starts
    a fresh worker.
    """
    __tracebackhide__ = True  # pytest: the error is the user's, not this frame's
    request = " ".join(("call", process.encode(pickle.dumps(sys.path)),
                        process.encode(_dumps((job, args, kwargs), by_value))))
    with _lock:
        worker = _started()
        reply = worker.call(request)
        if reply is None:
            error = _crashed(worker.error(), label or getattr(job, "__qualname__", repr(job)))
            _stop()
            raise error
    kind, data = reply.split(" ", 1)
    value = pickle.loads(process.decode(data))
    if kind == "returned":
        return value
    raise _rebuild(*value)


def _dumps(value, by_value) -> bytes:
    # cloudpickle sends by value only modules it can find by name (pytest's importlib mode
    # leaves test files out of sys.modules: their functions then go by reference)
    modules = [m for m in by_value if m is not None and m.__name__ != "__main__"
               and sys.modules.get(m.__name__) is m]
    for module in modules:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(value)
    finally:
        for module in modules:
            cloudpickle.unregister_pickle_by_value(module)


def _started() -> WorkerProcess:
    global _worker
    if _worker is None or _worker.failed:
        _worker = WorkerProcess()  # no work: it serves calls
    return _worker


def _stop() -> None:
    """Stops the worker (the next call starts a new one)."""
    global _worker
    if _worker is not None:
        _worker.__exit__(None, None, None)
        _worker = None


def shutdown() -> None:
    with _lock:
        _stop()


atexit.register(shutdown)


def _crashed(error: WorkerError, name) -> WorkerError:
    said = (f": {error.first_line}" if error.first_line != f"exit status {error.returncode}"
            else " without an error message")
    log = "\n".join(process.without_native_log(error.log)[-40:])
    error.args = (f"The TF1 worker process died (exit status {error.returncode}) while "
                  f"running {name}{said}. The next call starts a fresh worker."
                  + (f"\nIts stderr ended with:\n{log}" if log else ""),)
    return error


def _rebuild(data, type_name, text, remote_traceback):
    try:
        error = pickle.loads(data) if data is not None else None
    except Exception:
        error = None
    if not isinstance(error, BaseException):
        error = RemoteError(f"{type_name}: {text}")
    error.__cause__ = RemoteTraceback(remote_traceback)
    return error
