"""A quiet start for the command line: TensorFlow's C++ start-up log kept off the terminal.

Only the commands call this (`compat-grads check`, `bench`): the library itself never
touches the environment. TensorFlow reads `TF_CPP_MIN_LOG_LEVEL` once, when it loads, and
some lines (the CUDA stub, "All log messages before absl::InitializeLog()") are written
before that level applies, so the import itself runs with file descriptor 2 parked. Some
releases (2.18, 2.19) also log at run time whatever the level says ("MLIR V1 optimization
pass is not enabled"), so afterwards file descriptor 2 goes through a filter that drops
TensorFlow's log lines and passes everything else on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import tempfile
import threading

LEVEL = "TF_CPP_MIN_LOG_LEVEL"
NATIVE_LOG = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages before absl)")
"""A line of TensorFlow's native (C++ / absl) log."""


def add_argument(parser) -> None:
    """The `--tf-log` option of the commands that load TensorFlow."""
    parser.add_argument("--tf-log", action="store_true",
                        help="show TensorFlow's native (C++) log; by default it is kept quiet "
                             f"unless {LEVEL} is set below 3")


def import_tensorflow(show_log: bool = False):
    """Imports TensorFlow (through compat_grads._src.core.tf) and returns it.

    Unless `show_log`, the log level defaults to 3 (errors hidden too; a level the user set
    is kept) and, at that level, whatever TensorFlow writes to file descriptor 2 while it
    loads is dropped. The child processes the commands start inherit the level.
    """
    if "tensorflow" in sys.modules:
        from compat_grads._src.core.tf import tf

        return tf
    if not show_log:
        os.environ.setdefault(LEVEL, "3")
    quiet = not show_log and os.environ.get(LEVEL) == "3"
    with _parked_stderr() if quiet else contextlib.nullcontext():
        from compat_grads._src.core.tf import tf
    if quiet:
        _filter_native_log()
    return tf


def _filter_native_log() -> None:
    """From now on, what native code writes to file descriptor 2 passes through a thread
    that drops TensorFlow's log lines; `sys.stderr` (our messages, the progress bar) writes
    to the real stderr directly, so it stays a terminal when it is one."""
    sys.stderr.flush()
    real = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)
    sys.stderr = open(real, "w", buffering=1, encoding=sys.stderr.encoding,
                      errors="backslashreplace")

    def forward():
        with open(read, "rb") as pipe:
            for line in pipe:
                if not NATIVE_LOG.match(line.decode("utf-8", "replace")):
                    os.write(real, line)
    thread = threading.Thread(target=forward, name="native-log-filter", daemon=True)
    thread.start()

    def drain():  # at exit: close the pipe's last write end, let the thread pass on the rest
        os.dup2(real, 2)
        thread.join(1.0)
    atexit.register(drain)


@contextlib.contextmanager
def _parked_stderr():
    """Sends file descriptor 2 to a temporary file for the block (Python's own exceptions
    still reach the caller: they are raised, not written)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as parked:
        os.dup2(parked.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
