"""`compat-grads scan` as a command: the corpus's expected findings, the report, options,
exit codes and robustness (bad files are per-file errors with exit 2, never a crash or a
partial write)."""

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest
from scan_support import CORPUS, bad, expected, fixable, scan

from compat_grads import cli, migrate
from compat_grads.migrate import fixer, sources

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only


def test_corpus_reports_every_expected_finding_and_nothing_else(capsys):
    status, report = scan(capsys, CORPUS)
    found = {}
    for f in report["findings"]:
        found.setdefault(pathlib.Path(f["path"]).name, set()).add(
            (f["cell"], f["line"], f["code"]))
    files = sorted(CORPUS.glob("*.py")) + sorted(CORPUS.glob("*.ipynb"))
    for path in files:
        assert found.get(path.name, set()) == expected(path), path.name
    assert status == 1 and report["errors"] == [] and report["files"] == len(files)
    assert {f["code"] for f in report["findings"]} == set(migrate.CODES)


def test_clean_files_exit_0(capsys):
    clean = sorted(CORPUS.glob("*clean*.py"))
    status, report = scan(capsys, *clean)
    assert len(clean) >= 4 and status == 0 and report["findings"] == []


def test_text_output_is_path_line_col_code(capsys):
    assert cli.main(["scan", str(CORPUS / "report_only.py"),
                     str(CORPUS / "legacy_notebook.ipynb")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{CORPUS / 'report_only.py'}:3:1: CG107 private TensorFlow API" in lines[0]
    assert any(line.startswith(f"{CORPUS / 'legacy_notebook.ipynb'}:cell 3:3:17: CG101 ")
               for line in lines)
    assert lines[-1].startswith("compat-grads scan: ") and "finding(s) in 2 file(s)" in lines[-1]


def test_select_and_ignore(capsys):
    status, report = scan(capsys, "--select", "CG105", CORPUS)
    assert status == 1 and {f["code"] for f in report["findings"]} == {"CG105"}
    status, report = scan(capsys, "--ignore", "CG1", CORPUS)
    assert status == 0 and report["findings"] == []
    assert cli.main(["scan", "--select", "CG999", str(CORPUS)]) == 2
    assert "unknown code 'CG999'" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["scan"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["scan", "--fix", "--diff", str(tmp_path)])
    assert cli.main(["scan", str(tmp_path / "missing.py")]) == 2
    assert "no such file or directory (fix: check the path)" in capsys.readouterr().err


@pytest.mark.parametrize("name, data, message", [
    ("binary.py", b"\x7fELF\x00\x01", "binary file"),
    ("latin1.py", "x = 'café'\n".encode("latin-1"), "not valid UTF-8"),
    ("py2.py", b"print 'hello'\n", "cannot parse: line 1: Missing parentheses"),
    ("broken.ipynb", b'{"cells": [', "malformed notebook"),
    ("badcell.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "def f(:\n"}]}
                                 ).encode(), "cannot parse cell 1"),
])
def test_unreadable_files_are_errors_not_clean(tmp_path, capsys, name, data, message):
    good = bad(tmp_path, "good.py", b"import tensorflow as tf\n")
    status = cli.main(["scan", str(bad(tmp_path, name, data)), str(good)])
    captured = capsys.readouterr()
    assert status == 2 and message in captured.err and "(fix: " in captured.err
    assert captured.err.startswith(f"compat-grads scan: {tmp_path / name}: ")
    assert "1 file(s) could not be scanned" in captured.out


def test_files_that_must_parse(tmp_path, capsys):
    latin = bad(tmp_path, "latin.py", "# -*- coding: latin-1 -*-\nx = 'café'\n".encode("latin-1"))
    empty = bad(tmp_path, "empty.py", b"")
    newer = bad(tmp_path, "newer.py", b"match (n := 3):\n    case 3:\n        s = f'{n!r:>{n}}'\n")
    assert cli.main(["scan", str(latin), str(empty), str(newer)]) == 0
    assert "0 finding(s) in 3 file(s)" in capsys.readouterr().out


def test_huge_file_is_skipped_with_a_clear_error(tmp_path, capsys):
    huge = bad(tmp_path, "huge.py", b"#" * sources.MAX_BYTES + b"\n")
    assert cli.main(["scan", str(huge)]) == 2
    assert "over the 5242880-byte limit; skipped (fix: raise it with --max-size" in (
        capsys.readouterr().err)
    assert cli.main(["scan", "--max-size", str(10 ** 7), str(huge)]) == 0


def test_symlink_loops(tmp_path, capsys):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok.py").write_text("import tensorflow as tf\n")
    (tree / "again").symlink_to(tree)  # a directory loop: not followed
    (tree / "a.py").symlink_to(tree / "b.py")
    (tree / "b.py").symlink_to(tree / "a.py")  # a file loop: an error for that file
    status, report = scan(capsys, tree)
    assert status == 2 and report["files"] == 3
    assert {pathlib.Path(e["path"]).name for e in report["errors"]} == {"a.py", "b.py"}
    assert all("cannot read" in e["message"] for e in report["errors"])


def test_fix_keeps_mode_newlines_and_encoding(tmp_path, capsys):
    path = fixable(tmp_path)
    path.write_bytes("# -*- coding: latin-1 -*-\r\n# café\r\nimport tensorflow as tf\r\n"
                     "x = tf.constant([1.0])\r\nh = tf.hessians(x ** 3, x)\r\n".encode("latin-1"))
    assert cli.main(["scan", "--fix", str(path)]) == 0
    data = path.read_bytes()
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert data.count(b"\r\n") == data.count(b"\n") and "# café".encode("latin-1") in data
    assert b"h = [cg.hessian(tf.reduce_sum(x ** 3), x)]" in data
    assert "1 fixed" in capsys.readouterr().out


def test_failed_write_leaves_the_file_whole(tmp_path, capsys, monkeypatch):
    path = fixable(tmp_path)
    before = path.read_bytes()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    assert cli.main(["scan", "--fix", str(path)]) == 2
    assert "cannot write: No space left on device; left unchanged" in capsys.readouterr().err
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["legacy.py"]


def test_read_only_and_concurrently_changed_files_are_not_written(tmp_path, capsys,
                                                                  monkeypatch):
    path = fixable(tmp_path, mode=0o444)
    before = path.read_bytes()
    assert cli.main(["scan", "--fix", str(path)]) == 2
    assert "file is read-only; not rewritten" in capsys.readouterr().err
    assert path.read_bytes() == before
    path.chmod(0o644)
    real_fix = fixer.fix

    def racing_fix(text, findings):
        path.write_text(text + "\n# edited meanwhile\n", "utf-8")
        return real_fix(text, findings)

    monkeypatch.setattr(fixer, "fix", racing_fix)
    assert cli.main(["scan", "--fix", str(path)]) == 2
    assert "changed while it was being fixed" in capsys.readouterr().err
    assert path.read_text("utf-8").endswith("# edited meanwhile\n")
    assert os.listdir(tmp_path) == ["legacy.py"]


def test_scanning_never_imports_libcst():
    """Only the fixer may import LibCST (the scan-only path stays fast)."""
    package = pathlib.Path(migrate.__file__).parent
    for module in package.rglob("*.py"):
        imports = {alias.name.partition(".")[0] for node in ast.walk(ast.parse(
            module.read_text("utf-8"))) if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in getattr(node, "names", []) if isinstance(node, ast.Import)} | {
            (node.module or "").partition(".")[0] for node in ast.walk(ast.parse(
                module.read_text("utf-8"))) if isinstance(node, ast.ImportFrom)}
        assert ("libcst" in imports) == (module.name == "fixer.py"), module.name


_SPLITTERS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", _SPLITTERS, ids=lambda c: f"U+{ord(c):04X}")
def test_lines_are_split_as_python_splits_them(char):
    """Only \\r\\n, \\r and \\n end a line: str.splitlines also splits on form feeds & co."""
    text = ("import tensorflow as tf\n"
            f"\f# page{char}break\n"
            f"note = 'a{char}b'\n"
            "x = tf.constant([1.0, 2.0])\n"
            "y = x ** 2\n"
            "J = tf.stack([tf.gradients(y[i], x)[0] for i in range(2)])\n")
    found = migrate.scan_text(text)
    assert [(f.line, f.col, f.code) for f in found] == [(6, 5, "CG102")]
    fixed = migrate.fix_text(text)
    assert f"\f# page{char}break\n" in fixed and f"note = 'a{char}b'\n" in fixed
    assert "J = cg.stacked_jacobian(" in fixed and ast.parse(fixed)


def test_notebook_cells_with_ipython_syntax(tmp_path, capsys):
    """`x = !cmd`, `name?`, `%%time` cells are scanned; `%%bash` cells are skipped; a real
    syntax error in a cell gets a notebook-specific fix."""
    status, report = scan(capsys, CORPUS / "legacy_notebook.ipynb")
    assert status == 1 and report["errors"] == []
    assert {(f["cell"], f["line"], f["code"]) for f in report["findings"]} == expected(
        CORPUS / "legacy_notebook.ipynb")
    cells = [{"cell_type": "code", "source": "import tensorflow as tf\nprint 'x'\n"}]
    notebook = bad(tmp_path, "py2.ipynb", json.dumps({"cells": cells}).encode())
    assert cli.main(["scan", str(notebook)]) == 2
    err = capsys.readouterr().err
    assert "cannot parse cell 1: line 2" in err and "Python 2" not in err
    assert "exclude the notebook" in err


def test_an_internal_error_on_one_file_is_reported_and_the_others_are_scanned(
        tmp_path, capsys, monkeypatch):
    """A bug of the scanner on one file is a per-file error with its own exit status (3),
    never a traceback that stops the run."""
    from compat_grads.migrate import finder

    real_find = finder.find

    def find(tree, source, names):
        if "boom" in source:
            raise AttributeError("'Name' object has no attribute 'value'")
        return real_find(tree, source, names)

    monkeypatch.setattr(finder, "find", find)
    broken = bad(tmp_path, "a_bad.py", b"import tensorflow as tf\nboom = 1\n")
    good = fixable(tmp_path)
    status = cli.main(["scan", str(broken), str(good)])
    captured = capsys.readouterr()
    assert status == 3 and f"{good}:" in captured.out
    assert (f"compat-grads scan: {broken}: internal error in compat-grads scan (AttributeError: "
            "'Name' object has no attribute 'value'); please report") in captured.err
    assert cli.main(["scan", "--fix", str(broken), str(good)]) == 3
    assert "cg.hessian(" in good.read_text("utf-8")


def test_scanning_and_fixing_never_import_tensorflow():
    """`compat-grads scan` (and --diff, which runs the fixer) stays TensorFlow-free: the
    runtime helpers load TensorFlow only when code uses one (`cg.migrate.gradient_rows`)."""
    code = ("import contextlib, io, sys\n"
            "from compat_grads import cli, migrate\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    status = cli.main(['scan', '--diff', {str(CORPUS)!r}])\n"
            "assert status == 1, status\n"
            "assert 'tensorflow' not in sys.modules, 'scan imported tensorflow'\n"
            "assert 'compat_grads.migrate.runtime' not in sys.modules\n"
            "assert set(migrate.__all__) <= set(dir(migrate))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
