"""Writes docs/support.rst from the JUnit files the release matrix leaves in .tox/results.

    tox -m releases -m nightly        # each suite writes .tox/results/<env>.xml
    python docs/support_table.py      # reads them, writes docs/support.rst

One row per TensorFlow release, one column group per suite (TF1, TF2, doctests): tests
passed / failed (errors included) / expected failures / skipped, and the time taken.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import pathlib
import re
import xml.etree.ElementTree as ElementTree

HERE = pathlib.Path(__file__).resolve().parent
SUITES = {"tf1": "TF1 suite", "tf2": "TF2 suite", "tf2-doctests": "doctests"}


@dataclasses.dataclass
class Counts:
    """What one suite's JUnit file says."""

    tensorflow: str = "?"
    passed: int = 0
    failed: int = 0
    xfailed: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def cell(self) -> str:
        text = f"{self.passed} passed"
        for count, word in ((self.failed, "failed"), (self.xfailed, "xfail"),
                            (self.skipped, "skipped")):
            if count:
                text += f", {count} {word}"
        return f"{text} ({self.seconds:.0f} s)"


def read(path: pathlib.Path) -> Counts:
    """Counts of one JUnit file (pytest's), with the TensorFlow release it recorded."""
    counts = Counts()
    for suite in ElementTree.parse(path).getroot().iter("testsuite"):
        counts.seconds += float(suite.get("time", 0))
        for prop in suite.iter("property"):
            if prop.get("name") == "tensorflow":
                counts.tensorflow = prop.get("value")
        for case in suite.iter("testcase"):
            skipped = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                counts.failed += 1
            elif skipped is not None and skipped.get("type") == "pytest.xfail":
                counts.xfailed += 1
            elif skipped is not None:
                counts.skipped += 1
            else:
                counts.passed += 1
    return counts


def _suite(env: str):
    """(environment, suite) of a JUnit file's name: tf1-tf212 -> ("tf1-tf212", "tf1"),
    tf2-doctests -> ("tf2", "tf2-doctests"); None for other environments (lint)."""
    match = re.fullmatch(r"((tf[12])(-tf2\d\d|-nightly)?)(-doctests)?", env)
    if match is None:
        return None
    return match.group(1), match.group(2) + (match.group(4) or "")


def _release(version: str) -> str:
    """"2.12" for 2.12.1, "nightly" for a development build."""
    return "nightly" if "dev" in version else ".".join(version.split(".")[:2])


def table(results: dict, date: str) -> str:
    """The reStructuredText page for {(release, suite): Counts}."""
    releases = sorted({r for r, _ in results},
                      key=lambda r: (r == "nightly", [int(n) for n in r.split(".") if n.isdigit()]))
    header = ["release", "TensorFlow", *SUITES.values()]
    rows = []
    for release in releases:
        cells = [results.get((release, suite)) for suite in SUITES]
        version = next((c.tensorflow for c in cells if c is not None), "?")
        rows.append([release, version, *("not run" if c is None else c.cell() for c in cells)])
    lines = ["Supported TensorFlow releases", "=" * 29, "",
             "Both suites on each release (``tox -m releases -p 2``, ``tox -m nightly``), on",
             f"2 CPU cores with Python 3.11; table written on {date} by",
             "``python docs/support_table.py`` from those runs' JUnit files. Times are wall",
             "times with two environments at a time. CI runs the newest and the oldest",
             "release on every change.", "",
             ".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {cell}" for cell in row[1:]]
    return "\n".join(lines) + "\n"


def collect(folder: pathlib.Path) -> dict:
    """{(release, suite): Counts} of the JUnit files in `folder`. The release is the one
    the suite recorded (the doctests run in the same environment as its TF2 suite), so the
    plain tf1 / tf2 environments count for the release they installed."""
    found = {}
    for path in sorted(folder.glob("*.xml")):
        named = _suite(path.stem)
        if named is not None:
            found[named] = read(path)
    versions = {env: c.tensorflow for (env, _), c in found.items() if c.tensorflow != "?"}
    results = {}
    for (env, suite), counts in found.items():
        counts.tensorflow = versions.get(env, counts.tensorflow)
        if counts.tensorflow != "?":
            results[_release(counts.tensorflow), suite] = counts
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=pathlib.Path, default=HERE.parent / ".tox" / "results")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "support.rst")
    args = parser.parse_args(argv)
    results = collect(args.results)
    if not results:
        parser.error(f"no release results in {args.results}: run tox -m releases first")
    args.out.write_text(table(results, datetime.date.today().isoformat()), "utf-8")
    print(f"wrote {args.out} ({len(results)} suite runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
