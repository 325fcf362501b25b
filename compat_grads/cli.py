"""`compat-grads`: the command line. Each command lives in its own module; this one parses
the arguments and hands them over.

`compat-grads check`: run the shared matrix on this machine's TensorFlow and compare the
TF1 graph route (in a spawned process) with the TF2 routes (compat_grads.testing.check_command).
`compat-grads bench`: the benchmark suite (compat_grads.bench).
`compat-grads scan`: find legacy TF1 gradient idioms and rewrite them (compat_grads.migrate)."""

from __future__ import annotations

import argparse
import time

from compat_grads import _quiet, bench, migrate
from compat_grads.testing import check_command


def _parser():
    parser = argparse.ArgumentParser(prog="compat-grads", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _check_arguments(commands.add_parser(
        "check", help="run the test matrix on the installed TF",
        description="Runs the shared test matrix on this TensorFlow: by default a quick "
                    "check (" + check_command.QUICK_DOC + "); --full for every item."))
    bench.add_arguments(commands.add_parser(
        "bench", help="time compat_grads against the recipes users write (ratios)"))
    migrate.add_arguments(commands.add_parser(
        "scan", help="find legacy TF1 gradient idioms; --diff / --fix rewrite them"))
    return parser


def _check_arguments(check) -> None:
    check.add_argument("-k", dest="pattern", help="only items whose id matches (glob or text)")
    check.add_argument("--full", action="store_true",
                       help="run every item of the matrix, not the quick check's subset")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.add_argument("--strict-bitwise", action="store_true",
                       help="also require graph-backend routes to agree bit for bit")
    check.add_argument("--models", action="store_true",
                       help="run the Keras model matrix (Keras 2 models) instead")
    check.add_argument("--quiet", action="store_true",
                       help="no progress bar or heartbeat on stderr")
    check.add_argument("--heartbeat", type=float, default=5.0, metavar="SECONDS",
                       help="seconds between progress lines when stderr is not a terminal "
                            "(default 5)")
    _quiet.add_argument(check)


def main(argv=None) -> int:
    """The `compat-grads` command: parses `argv` (default: the command line) and runs the
    command it names; returns its exit status."""
    started = time.monotonic()
    args = _parser().parse_args(argv)
    if args.command == "scan":
        return migrate.run(args)
    _quiet.import_tensorflow(args.tf_log)
    if args.command == "bench":
        from compat_grads.bench import suite

        return suite.bench(args)
    return check_command.run(args, started)
