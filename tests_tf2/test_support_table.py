"""docs/support_table.py turns the release matrix's JUnit files into docs/support.rst."""

import importlib.util
import pathlib
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
_spec = importlib.util.spec_from_file_location("support_table", DOCS / "support_table.py")
support_table = sys.modules["support_table"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support_table)

# Test data, not skipped tests: a JUnit file as pytest writes it, with one of each outcome
# (an expected failure is a <skipped type="pytest.xfail">), so the counts can be checked.
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="2" tests="6" time="{time}">
{properties}
<testcase classname="a" name="ok1" time="1"/>
<testcase classname="a" name="ok2" time="1"/>
<testcase classname="a" name="bad" time="1"><failure message="x">x</failure></testcase>
<testcase classname="a" name="broken" time="1"><error message="e">e</error></testcase>
<testcase classname="a" name="known" time="1"><skipped type="pytest.xfail" message="TF bug"/>
</testcase>
<testcase classname="a" name="keras3" time="1"><skipped type="pytest.skip" message="no"/>
</testcase>
</testsuite></testsuites>
"""


def _write(folder, env, version, time):
    properties = "" if version == "?" else (
        f'<properties><property name="tensorflow" value="{version}"/></properties>')
    (folder / f"{env}.xml").write_text(JUNIT.format(properties=properties, time=time), "utf-8")


def test_counts_and_the_page(tmp_path):
    _write(tmp_path, "tf1-tf212", "2.12.1", 81.4)
    _write(tmp_path, "tf2-tf212", "2.12.1", 400.0)
    _write(tmp_path, "tf1-nightly", "2.23.0-dev20261026", 90.0)
    _write(tmp_path, "tf1", "2.21.0", 70.0)  # the plain environment counts for its release
    _write(tmp_path, "tf2-doctests", "?", 3.0)  # ... and so do its doctests
    _write(tmp_path, "tf2", "2.21.0", 300.0)
    _write(tmp_path, "lint", "2.21.0", 1.0)  # not a suite: left out
    counts = support_table.read(tmp_path / "tf1-tf212.xml")
    assert (counts.passed, counts.failed, counts.xfailed, counts.skipped) == (2, 2, 1, 1)
    assert counts.tensorflow == "2.12.1" and counts.seconds == 81.4
    out = tmp_path / "support.rst"
    assert support_table.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    page = out.read_text("utf-8")
    assert "   * - 2.12\n     - 2.12.1\n     - 2 passed, 2 failed, 1 xfail, 1 skipped (81 s)\n" \
           "     - 2 passed, 2 failed, 1 xfail, 1 skipped (400 s)\n     - not run\n" in page
    assert page.index("   * - 2.12") < page.index("   * - 2.21") < page.index("   * - nightly")
    assert "2.23.0-dev20261026" in page
    assert "   * - 2.21\n     - 2.21.0\n     - 2 passed, 2 failed, 1 xfail, 1 skipped (70 s)\n" \
           "     - 2 passed, 2 failed, 1 xfail, 1 skipped (300 s)\n" \
           "     - 2 passed, 2 failed, 1 xfail, 1 skipped (3 s)\n" in page
    assert page.count("   * - ") == 4  # header, 2.12, 2.21, nightly


def test_no_results_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        support_table.main(["--results", str(tmp_path), "--out", str(tmp_path / "x.rst")])
    assert stop.value.code == 2
    assert "no release results" in capsys.readouterr().err
