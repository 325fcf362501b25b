"""`compat-grads check`: run the shared matrix on this machine's TensorFlow and compare the
TF1 graph route (in a spawned process) with the TF2 routes (eager, tf.function, v1 Graph).
`compat-grads bench`: the benchmark suite (compat_grads.bench).
`compat-grads scan`: find legacy TF1 gradient idioms and rewrite them (compat_grads.migrate)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile

from compat_grads import bench, migrate

_HEADER = ("case", "function", "shape", "max |route diff|", "max err vs oracle", "verdict")


def _parser():
    parser = argparse.ArgumentParser(prog="compat-grads", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="run the test matrix on the installed TF")
    check.add_argument("-k", dest="pattern", help="only items whose id matches (glob or text)")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.add_argument("--strict-bitwise", action="store_true",
                       help="also require graph-backend routes to agree bit for bit")
    check.add_argument("--tf-log", action="store_true",
                       help="show TensorFlow's native log while the matrix runs")
    check.add_argument("--models", action="store_true",
                       help="run the Keras model matrix (tf_keras models) instead")
    bench.add_arguments(commands.add_parser(
        "bench", help="time compat_grads against the recipes users write (ratios)"))
    migrate.add_arguments(commands.add_parser(
        "scan", help="find legacy TF1 gradient idioms; --diff / --fix rewrite them"))
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bench":
        from compat_grads.bench import suite

        return suite.bench(args)
    if args.command == "scan":
        return migrate.run(args)
    if args.models:
        return check_models(args.pattern, args.json, args.tf_log)
    return check(args.pattern, args.json, args.strict_bitwise, args.tf_log)


@contextlib.contextmanager
def _native_stderr_to_file(keep: bool):
    """TensorFlow's C++ log writes to file descriptor 2 and reads its level only at start-up;
    park it in a temporary file while the matrix runs, unless asked to show it."""
    if keep:
        yield
        return
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


def check(pattern=None, as_json=False, bitwise=False, tf_log=False) -> int:
    """Runs the matrix; prints the table (or JSON); returns 1 on any mismatch, else 0."""
    from compat_grads.testing import checks, matrix, routes

    if bitwise:
        from compat_grads.testing import tolerances

        tolerances.pin_runtime_for_bitwise()

    def records(items):
        tf1 = checks.run_tf1_process(items, routes.TF1_ROUTES, bitwise)
        return [_record(item, *checks.check_item(item, routes.TF2_ROUTES, "tf1.tensor",
                                                 tf1[item.id], bitwise)) for item in items]
    return _check("matrix", matrix.items(pattern), records, pattern, as_json, tf_log)


def check_models(pattern=None, as_json=False, tf_log=False) -> int:
    """The Keras model matrix (compat_grads.testing.models), reported like `check`."""
    from compat_grads.testing import models

    def records(items):
        tf1 = models.run_tf1_process(pattern)
        return [_record(item, *models.check_item(item, tf1[item.id])) for item in items]
    return _check("model", models.items(pattern), records, pattern, as_json, tf_log)


def _check(kind, items, records_of, pattern, as_json, tf_log) -> int:
    """The shared frame of both checks: `records_of(items)` runs the TF1 process and the
    TF2 routes; returns the exit status."""
    from compat_grads._tf import tf

    tf.get_logger().setLevel("ERROR")  # the matrix retraces on purpose; keep the table clean
    if not items:
        print(f"compat-grads check: no {kind} item matches -k {pattern!r}", file=sys.stderr)
        return 2
    print(f"compat-grads check: TensorFlow {tf.__version__}, {len(items)} {kind} items; "
          f"running the TF1 graph routes in a separate process...", file=sys.stderr)
    with _native_stderr_to_file(tf_log):
        records = records_of(items)
    rows = _rows(records)
    print(json.dumps({"tensorflow": tf.__version__, "rows": rows, "items": records},
                     indent=1) if as_json else _table(rows))
    return 1 if any(row["verdict"] != "ok" for row in rows) else 0


def _record(item, problems, results, oracle_error, route_difference):
    shapes = sorted({", ".join("None" if v is None else str(tuple(v.shape)) for v in r.values)
                     for r in results.values() if not r.error})
    return {"id": item.id, "case": item.case.name, "function": item.function,
            "strategy": item.strategy, "unconnected": item.unconnected,
            "routes": sorted(results), "shapes": shapes, "oracle_error": oracle_error,
            "route_difference": route_difference, "problems": problems}


def _rows(records):
    rows = {}
    for rec in records:
        function = rec["function"] + (
            "" if rec["unconnected"] == "none" else f" ({rec['unconnected']})")
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
    lines = [" | ".join(_HEADER), " | ".join("---" for _ in _HEADER)]
    for row in rows:
        shape = row["shapes"][0] if len(row["shapes"]) == 1 else "DIFFERENT: " + " / ".join(
            row["shapes"])
        lines.append(" | ".join([row["case"], row["function"], shape,
                                 _number(row["route_difference"]),
                                 _number(row["oracle_error"]), row["verdict"]]))
    bad = [row for row in rows if row["verdict"] != "ok"]
    lines.append("")
    lines += [p for row in bad for p in row["problems"]]
    lines.append(f"{len(rows) - len(bad)} of {len(rows)} rows agree across routes and with "
                 f"the oracle." + (" MISMATCH found." if bad else ""))
    return "\n".join(lines)
