"""`compat-grads scan`: arguments, the per-file loop, reports (text like ruff, or JSON) and
exit status (0 clean, 1 findings, 2 usage errors or files that could not be scanned, 3 an
internal error on some file)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import io
import json
import os
import sys

from compat_grads.migrate import codes, finder, sources
from compat_grads.migrate.findings import Finding
from compat_grads.migrate.names import Names

_FIX_ROUNDS = 3  # a fix nested inside another lands in the next round
INTERNAL_ERROR = 3  # a bug of the scanner on some file (the other files are still scanned)


@dataclasses.dataclass
class Report:
    """What one run found: findings per file, per-file errors, fixes and diffs."""

    files: int = 0
    findings: list[tuple[str, int | None, Finding]] = dataclasses.field(
        default_factory=list)
    errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    internal: int = 0  # how many of the errors are the scanner's own bugs
    fixed: int = 0
    diffs: list[str] = dataclasses.field(default_factory=list)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the `scan` options to `parser`."""
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="files or directories (recursive: .py and .ipynb)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print the rewrites as unified diffs")
    mode.add_argument("--fix", action="store_true", help="apply the rewrites in place")
    parser.add_argument("--select", default="", help="comma-separated codes or prefixes")
    parser.add_argument("--ignore", default="", help="comma-separated codes or prefixes")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--max-size", type=int, default=sources.MAX_BYTES, metavar="BYTES",
                        help=f"skip larger files as errors (default {sources.MAX_BYTES})")


def run(args: argparse.Namespace) -> int:
    """Scans `args.paths`; prints the report; returns the exit status."""
    try:
        selected = codes.select(_split(args.select), _split(args.ignore))
    except ValueError as err:
        print(f"compat-grads scan: {err} (fix: pick codes from 'compat-grads scan --help' "
              "or docs/scan.rst)", file=sys.stderr)
        return 2
    report = Report()
    for path in args.paths:
        if not os.path.lexists(path):
            report.errors.append((path, "no such file or directory (fix: check the path)"))
    for path in sources.walk([p for p in args.paths if os.path.lexists(p)]):
        try:
            _scan_file(path, args, selected, report)
        except Exception as err:  # one file's bug must not stop the scan of the others
            report.internal += 1
            report.errors.append((path, f"internal error in compat-grads scan "
                                        f"({type(err).__name__}: {err}); please report"))
    _print(report, args)
    if report.internal:
        return INTERNAL_ERROR
    return 2 if report.errors else 1 if report.findings else 0


def scan_text(text: str, path: str = "<string>") -> list[Finding]:
    """The findings in Python source `text` (every code).

    Raises:
      ScanError: when `text` is not valid Python.
    """
    unit = sources.Unit(None, text, sources.parse(text, path))
    return finder.find(unit.tree, text, Names([unit.tree]))


def fix_text(text: str, path: str = "<string>", selected: set[str] | None = None) -> str:
    """`text` with every provable rewrite applied, to a fixed point (what `--fix` writes).

    Args:
      text: Python source.
      path: its name, for error messages.
      selected: the codes to fix (default: all).

    Raises:
      ScanError: when `text` is not valid Python, or a rewrite does not apply cleanly.
    """
    from compat_grads.migrate import fixer  # LibCST only when rewriting

    for _ in range(_FIX_ROUNDS):
        fixable = [f for f in scan_text(text, path) if f.edits and (
            selected is None or f.code in selected)]
        if not fixable:
            return text
        try:
            text = fixer.fix(text, fixable)
        except fixer.FixError as err:
            raise sources.ScanError(f"not fixed, the rewrite failed: {err} (fix: please "
                                    "report it; the file is unchanged)") from err
    return text


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _scan_file(path: str, args: argparse.Namespace, selected: set[str], report: Report) -> None:
    report.files += 1
    try:
        file = sources.load(path, args.max_size)
        found = _findings(file, selected)
        if (args.fix or args.diff) and not file.notebook and any(f.edits for _, f in found):
            found = _rewrite(file, found, selected, args, report)
    except sources.ScanError as err:
        report.errors.append((path, str(err)))
        return
    report.findings += [(path, cell, f) for cell, f in found]


def _findings(file: sources.SourceFile,
              selected: set[str]) -> list[tuple[int | None, Finding]]:
    if not any("tensorflow" in u.source or "keras" in u.source for u in file.units):
        return []  # every finding needs a TensorFlow or Keras import: skip the analysis
    names = Names(unit.tree for unit in file.units)
    return [(unit.cell, f) for unit in file.units
            for f in finder.find(unit.tree, unit.source, names) if f.code in selected]


def _rewrite(file: sources.SourceFile, found: list[tuple[int | None, Finding]],
             selected: set[str], args: argparse.Namespace,
             report: Report) -> list[tuple[int | None, Finding]]:
    """Fixes the file (writes it, or records the diff); returns the findings that remain."""
    text = fix_text(file.units[0].source, file.path, selected)
    if args.diff:
        report.diffs.append(_diff(file, text))
        return found
    remaining = [(None, f) for f in scan_text(text, file.path) if f.code in selected]
    sources.write_atomic(file, text)
    report.fixed += len(found) - len(remaining)
    return remaining


def _diff(file: sources.SourceFile, text: str) -> str:
    return "".join(difflib.unified_diff(_lines(file.units[0].source), _lines(text),
                                        f"a/{file.path}", f"b/{file.path}"))


def _lines(text: str) -> list[str]:
    """Python's lines (str.splitlines would also split on form feeds, \\x1c, \\u2028...)."""
    return io.StringIO(text, newline="").readlines()


def _print(report: Report, args: argparse.Namespace) -> None:
    for path, message in report.errors:
        print(f"compat-grads scan: {path}: {message}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(_as_json(report), indent=1))
        return
    for diff in report.diffs:
        print(diff, end="")
    for path, cell, f in report.findings:
        where = f"{path}:cell {cell}:{f.line}:{f.col}" if cell else f"{path}:{f.line}:{f.col}"
        mark = "[*] " if f.edits and not path.endswith(".ipynb") else ""
        print(f"{where}: {f.code} {mark}{f.message}")
    print(_summary(report))


def _summary(report: Report) -> str:
    fixable = sum(1 for p, _, f in report.findings if f.edits and not p.endswith(".ipynb"))
    parts = [f"{len(report.findings)} finding(s) in {report.files} file(s)"]
    if report.fixed:
        parts.append(f"{report.fixed} fixed")
    if fixable:
        parts.append(f"{fixable} fixable with --fix ([*])")
    if report.errors:
        parts.append(f"{len(report.errors)} file(s) could not be scanned")
    return "compat-grads scan: " + ", ".join(parts) + "."


def _as_json(report: Report) -> dict:
    findings = [{"path": path, "cell": cell, "line": f.line, "column": f.col, "code": f.code,
                 "message": f.message, "fixable": bool(f.edits) and not path.endswith(".ipynb")}
                for path, cell, f in report.findings]
    errors = [{"path": path, "message": message} for path, message in report.errors]
    return {"files": report.files, "findings": findings, "errors": errors,
            "fixed": report.fixed, "diffs": report.diffs}
