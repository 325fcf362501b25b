"""The `compat-grads` command line: `check`, `bench` and `scan` (each in its own module,
compat_grads.testing.check_command, compat_grads.bench and compat_grads.migrate); this
module parses the arguments and hands them over."""

from __future__ import annotations

import argparse
import textwrap
import time

from compat_grads import __version__, bench, migrate
from compat_grads._src.console import quiet as _quiet
from compat_grads.testing import check_command

DESCRIPTION = """\
Jacobians, per-sample Hessians and Laplacians that agree in TF1 graphs and TF2: check
them on this TensorFlow, time them, and find the TF1 gradient idioms they replace."""

EPILOG = """\
examples:
  compat-grads check                  are the TF1 graph and TF2 results the same here?
  compat-grads scan src/              which legacy gradient idioms does this code use?
  compat-grads scan --fix train.py    rewrite them to compat_grads calls, in place
  compat-grads bench --quick          does the benchmark suite run here?

`compat-grads COMMAND --help` tells each command's options and exit status."""

_EXAMPLES = {
    "check": """\
examples:
  compat-grads check             the quick check: every function in every mode
  compat-grads check --full      every item of the matrix
  compat-grads check -k hessian  only items whose id matches

exit status: 0 every row agrees, 1 a mismatch, 2 no item matches -k or the TF1
process failed, 130 after Ctrl-C, 143 after SIGTERM""",
    "bench": """\
examples:
  compat-grads bench --quick     tiny sizes: checks that it runs
  compat-grads bench --traces    Laplacians and divergences against the recipes
                                 they replace
  compat-grads bench --curvature Hessian products, eigenvalues, traces and the
                                 empirical NTK against the hand-written recipes

exit status: 0 when the bench ran (its targets are reported, not enforced)""",
    "scan": """\
examples:
  compat-grads scan src/           report legacy gradient idioms
  compat-grads scan --diff src/    show the rewrites
  compat-grads scan --fix train.py apply them in place

exit status: 0 no findings, 1 findings (after --fix: findings that remain), 2
usage errors or files that could not be read, parsed or written, 3 an internal
error on some file""",
}


def _parser():
    parser = argparse.ArgumentParser(
        prog="compat-grads", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"compat-grads {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, summary, description):
        return commands.add_parser(name, help=summary, description=textwrap.fill(description, 79),
                                   epilog=_EXAMPLES[name],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    _check_arguments(command(
        "check", "check that TF1 graph and TF2 results agree on this TensorFlow",
        "Runs the shared test matrix on this TensorFlow against a float64 oracle and "
        "prints one row per item: by default a quick check (" + check_command.QUICK_DOC +
        "; each item in a TF1 graph and in one TF2 mode); --full for every item on every "
        "route, each also against the others."))
    bench.add_arguments(command(
        "bench", "time compat_grads against the recipes users write (ratios)",
        "Times compat_grads side by side with the recipes users write today and with "
        "TensorFlow's best, in one run; ratios are their time over ours (above 1: ours is "
        "faster)."))
    migrate.add_arguments(command(
        "scan", "find legacy TF1 gradient idioms; --diff / --fix rewrite them",
        "Finds legacy TF1 gradient idioms (Python loops of tf.gradients, tf.map_fn over "
        "gradients, nested tapes, private TensorFlow APIs, ...) in .py and .ipynb files, "
        "and rewrites the ones it can prove equivalent to compat_grads calls."))
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
