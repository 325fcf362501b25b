"""`compat-grads scan`: the corpus's expected findings, --fix / --diff, options, exit codes and
robustness (bad files are per-file errors with exit 2, never a crash or a partial write)."""

import ast
import dataclasses
import json
import os
import pathlib
import re
import shutil

import numpy as np
import pytest

from compat_grads import cli, migrate
from compat_grads.migrate import fixer, sources
from compat_grads.migrate import names as migrate_names

CORPUS = pathlib.Path(__file__).resolve().parent / "scan_corpus"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


def _expected(path: pathlib.Path) -> set:
    """(cell, line, code) from the `# expect: CODE` comments of a corpus file."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text("utf-8"))["cells"]
        texts = [(n, "".join(c["source"])) for n, c in enumerate(cells, 1)
                 if c["cell_type"] == "code"]
    else:
        texts = [(None, path.read_text("utf-8"))]
    return {(cell, line, code.strip()) for cell, text in texts
            for line, row in enumerate(text.splitlines(), 1)
            for match in _EXPECT.finditer(row) for code in match.group(1).split(",")}


def _scan(capsys, *args) -> tuple[int, dict]:
    status = cli.main(["scan", "--format", "json", *map(str, args)])
    return status, json.loads(capsys.readouterr().out)


def test_corpus_reports_every_expected_finding_and_nothing_else(capsys):
    status, report = _scan(capsys, CORPUS)
    found = {}
    for f in report["findings"]:
        found.setdefault(pathlib.Path(f["path"]).name, set()).add(
            (f["cell"], f["line"], f["code"]))
    files = sorted(CORPUS.glob("*.py")) + sorted(CORPUS.glob("*.ipynb"))
    for path in files:
        assert found.get(path.name, set()) == _expected(path), path.name
    assert status == 1 and report["errors"] == [] and report["files"] == len(files)
    assert {f["code"] for f in report["findings"]} == set(migrate.CODES)


def test_clean_files_exit_0(capsys):
    clean = sorted(CORPUS.glob("*clean*.py"))
    status, report = _scan(capsys, *clean)
    assert len(clean) >= 4 and status == 0 and report["findings"] == []


def test_fix_twice_is_idempotent_and_leaves_report_only_findings(tmp_path, capsys):
    tree = shutil.copytree(CORPUS, tmp_path / "corpus")
    _, first = _scan(capsys, "--fix", tree)
    after = {p: p.read_bytes() for p in sorted(tree.iterdir())}
    status, second = _scan(capsys, "--fix", tree)
    assert first["fixed"] >= 17 and second["fixed"] == 0 and status == 1
    assert after == {p: p.read_bytes() for p in sorted(tree.iterdir())}
    assert first["findings"] == second["findings"]
    assert not [f for f in second["findings"] if f["fixable"]]
    for path in tree.glob("*.py"):
        ast.parse(path.read_bytes())
    assert (tree / "legacy_notebook.ipynb").read_bytes() == (
        CORPUS / "legacy_notebook.ipynb").read_bytes()


def test_fix_keeps_comments_and_adds_the_import_once():
    text = (CORPUS / "loop_of_gradients_expand_dims.py").read_text("utf-8")
    fixed = migrate.fix_text(text)
    assert fixed.count("import compat_grads as cg") == 1
    for comment in ("# 计算第i个y元素对x的梯度", "# 增加维度以便堆叠", "# 堆叠后调整到目标维度"):
        assert comment in fixed
    assert "for i in range" not in fixed and "grads_list" not in fixed
    assert migrate.fix_text(fixed) == fixed


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "h.py"
    shutil.copy(CORPUS / "hessians.py", path)
    before = path.read_bytes()
    assert cli.main(["scan", "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"--- a/{path}" in out and "+h_x = [cg.hessian(tf.reduce_sum(y), x)]" in out
    assert path.read_bytes() == before


def test_text_output_is_path_line_col_code(capsys):
    assert cli.main(["scan", str(CORPUS / "report_only.py"),
                     str(CORPUS / "legacy_notebook.ipynb")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{CORPUS / 'report_only.py'}:3:1: CG107 private TensorFlow API" in lines[0]
    assert any(line.startswith(f"{CORPUS / 'legacy_notebook.ipynb'}:cell 3:3:17: CG101 ")
               for line in lines)
    assert lines[-1].startswith("compat-grads scan: ") and "finding(s) in 2 file(s)" in lines[-1]


def test_select_and_ignore(capsys):
    status, report = _scan(capsys, "--select", "CG105", CORPUS)
    assert status == 1 and {f["code"] for f in report["findings"]} == {"CG105"}
    status, report = _scan(capsys, "--ignore", "CG1", CORPUS)
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


def _bad(tmp_path, name, data: bytes) -> pathlib.Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, data, message", [
    ("binary.py", b"\x7fELF\x00\x01", "binary file"),
    ("latin1.py", "x = 'café'\n".encode("latin-1"), "not valid UTF-8"),
    ("py2.py", b"print 'hello'\n", "cannot parse: line 1: Missing parentheses"),
    ("broken.ipynb", b'{"cells": [', "malformed notebook"),
    ("badcell.ipynb", json.dumps({"cells": [{"cell_type": "code", "source": "def f(:\n"}]}
                                 ).encode(), "cannot parse cell 1"),
])
def test_unreadable_files_are_errors_not_clean(tmp_path, capsys, name, data, message):
    good = _bad(tmp_path, "good.py", b"import tensorflow as tf\n")
    status = cli.main(["scan", str(_bad(tmp_path, name, data)), str(good)])
    captured = capsys.readouterr()
    assert status == 2 and message in captured.err and "(fix: " in captured.err
    assert captured.err.startswith(f"compat-grads scan: {tmp_path / name}: ")
    assert "1 file(s) could not be scanned" in captured.out


def test_files_that_must_parse(tmp_path, capsys):
    latin = _bad(tmp_path, "latin.py", "# -*- coding: latin-1 -*-\nx = 'café'\n".encode("latin-1"))
    empty = _bad(tmp_path, "empty.py", b"")
    newer = _bad(tmp_path, "newer.py", b"match (n := 3):\n    case 3:\n        s = f'{n!r:>{n}}'\n")
    assert cli.main(["scan", str(latin), str(empty), str(newer)]) == 0
    assert "0 finding(s) in 3 file(s)" in capsys.readouterr().out


def test_huge_file_is_skipped_with_a_clear_error(tmp_path, capsys):
    huge = _bad(tmp_path, "huge.py", b"#" * sources.MAX_BYTES + b"\n")
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
    status, report = _scan(capsys, tree)
    assert status == 2 and report["files"] == 3
    assert {pathlib.Path(e["path"]).name for e in report["errors"]} == {"a.py", "b.py"}
    assert all("cannot read" in e["message"] for e in report["errors"])


def _fixable(tmp_path, mode=0o640, text=None) -> pathlib.Path:
    path = tmp_path / "legacy.py"
    path.write_text(text or (CORPUS / "hessians.py").read_text("utf-8"), "utf-8")
    path.chmod(mode)
    return path


def test_fix_keeps_mode_newlines_and_encoding(tmp_path, capsys):
    path = _fixable(tmp_path)
    path.write_bytes("# -*- coding: latin-1 -*-\r\n# café\r\nimport tensorflow as tf\r\n"
                     "x = tf.constant([1.0])\r\nh = tf.hessians(x ** 3, x)\r\n".encode("latin-1"))
    assert cli.main(["scan", "--fix", str(path)]) == 0
    data = path.read_bytes()
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert data.count(b"\r\n") == data.count(b"\n") and "# café".encode("latin-1") in data
    assert b"h = [cg.hessian(tf.reduce_sum(x ** 3), x)]" in data
    assert "1 fixed" in capsys.readouterr().out


def test_failed_write_leaves_the_file_whole(tmp_path, capsys, monkeypatch):
    path = _fixable(tmp_path)
    before = path.read_bytes()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    assert cli.main(["scan", "--fix", str(path)]) == 2
    assert "cannot write: No space left on device; left unchanged" in capsys.readouterr().err
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["legacy.py"]


def test_read_only_and_concurrently_changed_files_are_not_written(tmp_path, capsys,
                                                                  monkeypatch):
    path = _fixable(tmp_path, mode=0o444)
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
    for module in package.glob("*.py"):
        imports = {alias.name.partition(".")[0] for node in ast.walk(ast.parse(
            module.read_text("utf-8"))) if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in getattr(node, "names", []) if isinstance(node, ast.Import)} | {
            (node.module or "").partition(".")[0] for node in ast.walk(ast.parse(
                module.read_text("utf-8"))) if isinstance(node, ast.ImportFrom)}
        assert ("libcst" in imports) == (module.name == "fixer.py"), module.name


def test_report_only_corpus_is_never_rewritten():
    """`y[..., i]`, a target recomputed per row and the rest of report_only.py: findings
    without a rewrite; --fix changes nothing."""
    text = (CORPUS / "report_only.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert len(found) == len(_expected(CORPUS / "report_only.py"))
    assert [f for f in found if f.edits] == []
    assert migrate.fix_text(text) == text


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


def test_fix_error_names_the_line_and_column():
    text = "import tensorflow as tf\nh = tf.hessians(y, x)\n"
    finding = migrate.scan_text(text)[0]
    moved = dataclasses.replace(finding, edits=(dataclasses.replace(
        finding.edits[0], start=(2, 3), end=(2, 9)),))
    with pytest.raises(fixer.FixError, match=r"^no code found at line 2, column 4 to "
                                             r"rewrite$"):
        fixer.fix(text, [moved])


def test_the_import_goes_after_the_import_block_of_tensorflow():
    text = ('"""Doc."""\nfrom __future__ import annotations\n\nimport os\nimport tensorflow as tf\n'
            "import numpy as np\n\nx = tf.constant(np.ones(2))\nh = tf.hessians(x ** 3, x)\n")
    fixed = migrate.fix_text(text)
    assert fixed.startswith('"""Doc."""\nfrom __future__ import annotations\n\nimport os\n'
                            "import tensorflow as tf\nimport numpy as np\n"
                            "import compat_grads as cg\n\nx = ")


@pytest.mark.parametrize("head, setup", [
    ("import tensorflow.compat.v1 as tf\n", "tf.disable_v2_behavior()\n"),
    ("import numpy as np\nimport tensorflow as tf\nimport os\n",
     "tf.compat.v1.disable_eager_execution()\ntf.compat.v1.disable_v2_tensorshape()\n"),
    ("from tensorflow.compat import v1\n", "v1.disable_v2_behavior()\nimport numpy as np\n"),
], ids=["disable-v2", "block-and-calls", "from-import"])
def test_the_import_does_not_split_tensorflow_from_its_setup_calls(head, setup):
    text = head + setup + "print('ready')\nx = tf.ones([2])\nh = tf.hessians(x ** 3, x)\n"
    text = text.replace("tf.", "v1.") if "import v1" in head else text
    fixed = migrate.fix_text(text)
    assert fixed.startswith(head + setup + "import compat_grads as cg\nprint('ready')\n")


def test_the_import_comes_before_the_first_rewrite_without_a_top_level_tensorflow_import():
    text = ("try:\n    import tensorflow.compat.v1 as tf\nexcept ImportError:\n    tf = None\n"
            "x = tf.constant([1.0])\nh = tf.hessians(x ** 3, x)\nimport os\n")
    fixed = migrate.fix_text(text.replace("    tf = None\n", "    raise\n"))
    lines = fixed.splitlines()
    assert lines.index("import compat_grads as cg") < lines.index(
        "h = [cg.hessian(tf.reduce_sum(x ** 3), x)]") < lines.index("import os")


def test_module_aliases_assigned_to_names_are_tracked():
    text = ("import tensorflow as tf\nK = tf.keras.backend\ntf = tf.compat.v1\n"
            "x = tf.placeholder(tf.float32, [2])\ng = K.gradients(tf.reduce_sum(x), x)\n"
            "h = tf.hessians(x ** 3, x)\n")
    assert [f.code for f in migrate.scan_text(text)] == ["CG108", "CG105"]
    shadowed = text.replace("K = tf.keras.backend\n", "K = tf.keras.backend\nK = object()\n")
    assert [f.code for f in migrate.scan_text(shadowed)] == ["CG105"]


def test_notebook_cells_with_ipython_syntax(tmp_path, capsys):
    """`x = !cmd`, `name?`, `%%time` cells are scanned; `%%bash` cells are skipped; a real
    syntax error in a cell gets a notebook-specific fix."""
    status, report = _scan(capsys, CORPUS / "legacy_notebook.ipynb")
    assert status == 1 and report["errors"] == []
    assert {(f["cell"], f["line"], f["code"]) for f in report["findings"]} == _expected(
        CORPUS / "legacy_notebook.ipynb")
    cells = [{"cell_type": "code", "source": "import tensorflow as tf\nprint 'x'\n"}]
    bad = _bad(tmp_path, "py2.ipynb", json.dumps({"cells": cells}).encode())
    assert cli.main(["scan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot parse cell 1: line 2" in err and "Python 2" not in err
    assert "exclude the notebook" in err


@pytest.mark.parametrize("call", [
    "tf.linalg.slogdet(m)", "tf.linalg.eig(m)", "tf.linalg.lu(m)", "tf.linalg.normalize(m)",
    "tf.math.top_k(m, 2)", "tf.unstack(m)", "tf.split(m, 2)", "tf.meshgrid(m, m)",
    "tf.gradients(m, m)", "tf.linalg.LinearOperatorFullMatrix(m)", "tf.random.Generator(1)",
    "tf.random.uniform_candidate_sampler(m, 1, 1, True, 2)",
])
def test_ops_returning_several_tensors_are_not_one_tensor(call):
    tree = ast.parse(f"import tensorflow as tf\nt = {call}\n")
    names = migrate_names.Names([tree])
    assert not names.is_tensor(tree.body[1].value) and "t" not in names.tensors


REPORT_ONLY_FORMS = ["forward_mode_attributes.py", "forward_trick_lookalikes.py",
                     "tape_gradient_loop.py"]


@pytest.mark.parametrize("name", REPORT_ONLY_FORMS)
def test_loop_forms_say_why_they_are_not_rewritten_and_stay_as_they_are(name):
    text = (CORPUS / name).read_text("utf-8")
    found = migrate.scan_text(text)
    assert len(found) == len(_expected(CORPUS / name)) and not [f for f in found if f.edits]
    assert all("(not rewritten: " in f.message for f in found
               if f.code in ("CG106", "CG109", "CG110"))
    assert migrate.fix_text(text) == text


@pytest.mark.parametrize("name, unfixed", [("while_loop_jacobian.py", [58]),
                                           ("map_helper_jacobian.py", []),
                                           ("while_loop_programs.py", [])])
def test_while_loop_forms_call_the_runtime_checked_loop(name, unfixed):
    """The TensorArray loops (inline, or in a map helper of the module) get
    cg.migrate.row_while_loop in place of tf.while_loop, same arguments; the concatenating
    loop says why it is left alone; the fix is idempotent."""
    text = (CORPUS / name).read_text("utf-8")
    found = migrate.scan_text(text)
    assert sorted((None, f.line, f.code) for f in found) == sorted(_expected(CORPUS / name))
    assert sorted(f.line for f in found if not f.edits) == unfixed
    for f in found:
        assert all(e.text.endswith(".migrate.row_while_loop") for e in f.edits)
    fixed = migrate.fix_text(text)
    assert fixed.count("cg.migrate.row_while_loop(") == len({e.start for f in found
                                                             for e in f.edits})
    assert ("tf.while_loop(" in fixed) == bool(unfixed) and migrate.fix_text(fixed) == fixed
    ast.parse(fixed)


def test_a_map_helper_of_another_notebook_cell_is_not_rewritten(tmp_path, capsys):
    cells = ["import tensorflow as tf\n"
             "def loop_map(fn, xs):\n"
             "    n = tf.shape(xs)[0]\n"
             "    return tf.while_loop(lambda j, a: j < n,\n"
             "                         lambda j, a: (j + 1, a.write(j, fn(xs[j]))),\n"
             "                         [0, tf.TensorArray(tf.float32, size=n)])\n",
             "x = tf.ones([3])\n"
             "J = loop_map(lambda e: tf.gradients(e, x)[0], tf.sin(x))\n"]
    notebook = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                           "execution_count": None} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "helper.ipynb"
    path.write_text(json.dumps(notebook))
    status, report = _scan(capsys, path)
    (finding,) = report["findings"]
    assert finding["code"] == "CG109" and not finding["fixable"]
    assert "(not rewritten: loop_map is your own function" in finding["message"]


def test_rows_sliced_after_recording_are_reported_as_none_and_they_are():
    """The message is true: those loops get None rows (the tape never saw the slices); the
    loop that slices inside the `with` block gets the Jacobian's rows."""
    import runpy

    import tensorflow as tf

    path = CORPUS / "tape_gradient_loop.py"
    messages = {f.line: f.message for f in migrate.scan_text(path.read_text("utf-8"))}
    after = [line for line, m in messages.items() if "stopped recording" in m]
    assert len(after) == 2 and all("the result is None" in messages[line] for line in after)
    module = runpy.run_path(str(path))
    x_value = np.array([[0.5, -1.0], [2.0, 0.3]], np.float32)
    w_value = np.array([[1.0, 2.0], [-0.5, 0.7]], np.float32)
    x = tf.constant(x_value)
    model = lambda v: tf.tanh(tf.matmul(v, tf.constant(w_value)))  # noqa: E731
    with pytest.raises(AttributeError, match="NoneType"):
        module["class_gradients"](model, x, 2)  # None.numpy()
    with pytest.raises(ValueError, match="None"):
        module["rows_by_comprehension"](tf.sin, x, 2)  # tf.stack of None rows
    rows = module["class_gradients_recomputed"](model, x, 2)  # [batch, class, feature]
    slope = 1.0 - np.tanh(x_value @ w_value) ** 2  # d sum_b y[b, k] / dx[b, j]
    want = slope[:, :, None] * w_value.T[None, :, :]
    assert rows.shape == (2, 2, 2)
    np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, advice", [
    ("control_flow_ops.pfor", "use tf.vectorized_map, or cg.stacked_jacobian"),
    ("control_flow_ops.for_loop", "use tf.map_fn or tf.while_loop"),
    ("gradients_impl._hessian_vector_product", "use cg.hvp(f, x, v)"),
    ("pfor_gradients.jacobian", "use cg.stacked_jacobian(y, x)"),
])
def test_private_calls_name_their_public_replacement(call, advice):
    found = [f for f in migrate.scan_text((CORPUS / "report_only.py").read_text("utf-8"))
             if f.code == "CG107" and f"({call})" in f.message]
    assert found and all(advice in f.message for f in found)


def test_column_loops_get_the_row_sum_advice():
    text = ("import tensorflow.compat.v1 as tf\n"
            "def cols(model, x, k):\n"
            "    return tf.stack([tf.gradients(model(x)[:, i], x)[0] for i in range(k)])\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG102" and "graph per column" in found.message and not found.edits
    assert "cg.stacked_jacobian(tf.reduce_sum(y, axis=0), x)" in found.message


@pytest.mark.parametrize("fn, works", [
    ("lambda xi: tf.gradients(tf.sin(xi), xi)[0]", True),
    ("lambda yi: tf.gradients(yi, x)[0]", False),
])
def test_map_fn_message_says_whether_the_code_fails(fn, works):
    text = (f"import tensorflow.compat.v1 as tf\nx = tf.ones([3])\n"
            f"g = tf.map_fn({fn}, tf.sin(x))\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG103"
    assert ("it works, slowly" in found.message) is works
    assert ("fails at run time" in found.message) is not works


def test_every_unfixed_loop_finding_says_why():
    for path in sorted(CORPUS.glob("*.py")):
        for found in migrate.scan_text(path.read_text("utf-8")):
            if found.code in ("CG101", "CG102", "CG106", "CG109", "CG110") and not found.edits:
                assert "(not rewritten: " in found.message, (path.name, found)


def test_notebook_functions_shared_between_cells(tmp_path, capsys):
    """A cell calls functions another cell defines (twice, as re-run notebooks do): the
    scan finds the forms through them and ends (a function of another cell has no scope in
    this one)."""
    cells = ["import tensorflow as tf\n"
             "def loop_map(fn, xs):\n"
             "    n = tf.shape(xs)[0]\n"
             "    return tf.while_loop(lambda j, a: j < n,\n"
             "                         lambda j, a: (j + 1, a.write(j, fn(xs[j]))),\n"
             "                         [0, tf.TensorArray(tf.float32, size=n)])\n"
             "def row(yi):\n"
             "    return tf.gradients(yi, x)[0]\n"
             "def twice(yi):\n"
             "    return tf.gradients(yi, x)[0]\n",
             "def twice(yi):  # which one runs depends on the order the cells ran in\n"
             "    return 2 * tf.gradients(yi, x)[0]\n",
             "x = tf.ones([3])\n"
             "y = tf.sin(x)\n"
             "J = loop_map(lambda e: tf.gradients(e, x)[0], y)\n"
             "M = tf.map_fn(row, y)\n"
             "T = tf.map_fn(twice, y)\n"]
    notebook = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                           "execution_count": None} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "shared.ipynb"
    path.write_text(json.dumps(notebook))
    status, report = _scan(capsys, path)
    assert status == 1
    assert sorted((f["cell"], f["line"], f["code"]) for f in report["findings"]) == [
        (3, 3, "CG109"), (3, 4, "CG103")]


_SHADOWED_BODY = ("import tensorflow.compat.v1 as tf\n"
                  "x = tf.ones([3])\n"
                  "y = tf.sin(x)\n"
                  "def body(i, acc):\n"
                  "{rows}"
                  "    return i + 1, acc.write(i, rows)\n"
                  "loop = tf.while_loop(lambda i, _: i < 3, body,\n"
                  "                     [0, tf.TensorArray(tf.float32, size=3)])\n")


@pytest.mark.parametrize("rows, codes", [
    ("    rows = tf.stack([tf.gradients(y[i], x)[0] for i in range(3)])\n", ["CG102"]),
    ("    rows = tf.map_fn(lambda i: tf.gradients(y[i], x)[0], tf.range(3),\n"
     "                     dtype=tf.float32)\n", ["CG103"]),
    ("    def row(i):\n"
     "        return tf.gradients(y[i], x)[0]\n"
     "    rows = tf.map_fn(row, tf.range(3), dtype=tf.float32)\n", ["CG103"]),
    ("    rows = tf.stack([tf.gradients(y[i], x)[0] for k in range(3)])\n", ["CG109"]),
    ("    rows = tf.stack([tf.gradients(y[k], x)[0] for k in range(i)])\n", ["CG102"]),
], ids=["comprehension", "lambda", "nested-def", "not-shadowed", "outer-in-iterable"])
def test_names_are_resolved_by_scope(rows, codes):
    """A comprehension, a lambda or a nested function that binds the loop counter's name
    again has a variable of its own: its rows are not the tf.while_loop's (Python 3)."""
    found = migrate.scan_text(_SHADOWED_BODY.format(rows=rows))
    assert [f.code for f in found] == codes
    assert all(f.edits for f in found if f.code in ("CG102", "CG103"))


def test_the_forward_trick_with_tangents_of_ones_is_per_element_gradients():
    """The message says what the form is; --fix writes it and drops the spent g and dummy
    (kept when used otherwise); every look-alike says why it is left alone."""
    text = (CORPUS / "forward_trick_ones.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert [f.code for f in found] == ["CG106"] * 3 and all(f.edits for f in found)
    assert all("this is exactly cg.per_element_gradients(U, x) (dy/dx with U's shape)"
               in f.message for f in found)
    fixed = migrate.fix_text(text)
    assert "cg.per_element_gradients(hidden, inputs)  # expect: CG106" in fixed
    assert "per_element_gradients(U, tf.nest.flatten(x)[0])" in fixed
    assert "grad_ys=dummy)[0]\n" not in fixed and "blank" not in fixed and "grad_ys=seed" in fixed
    reasons = [f.message.partition("(not rewritten: ")[2] for f in migrate.scan_text(
        (CORPUS / "forward_trick_lookalikes.py").read_text("utf-8"))]
    assert [r.split(" ")[:3] for r in reasons] == [
        ["the", "second", "tf.gradients"], ["U", "or", "x"], ["the", "dummy", "is"],
        ["the", "dummy", "is"], ["U", "or", "x"], ["U", "or", "x"], ["the", "result", "is"]]
    assert "used elsewhere" in reasons[3] and "placeholder" in reasons[2]


def test_per_point_gradients_of_a_physics_network_are_not_reported():
    text = (CORPUS / "clean_pinn.py").read_text("utf-8")
    assert text.count("tf.gradients(") == 7 and migrate.scan_text(text) == []


def test_comments_of_a_removed_loop_stay_with_the_statement_that_replaces_it():
    """A loop whose rows the statement before it now computes takes its comments there, not
    to the unrelated next line; a loop replaced whole keeps the comments of its body."""
    text = ("import tensorflow.compat.v1 as tf\n"
            "def class_gradients(probs, x):\n"
            "    grads = []\n"
            "    # one gradient per class\n"
            "    for k in range(3):\n"
            "        grads.append(tf.gradients(probs[:, k], x)[0])  # class k\n"
            "    first = grads[0]\n"
            "    cache = [None] * 3\n"
            "    for label in [0, 2]:\n"
            "        # only the missing rows\n"
            "        if cache[label] is None:\n"
            "            cache[label] = tf.gradients(probs[:, label], x)[0]\n"
            "    return first, cache\n")
    fixed = migrate.fix_text(text)
    assert ("    # one gradient per class\n    # class k\n"
            "    grads = cg.migrate.gradient_row_list(probs, x, range(3), axis=1)\n"
            "    first = grads[0]\n") in fixed
    assert ("    cache = [None] * 3\n    # only the missing rows\n"
            "    cg.migrate.fill_gradient_rows(cache, probs, x, [0, 2], axis=1)\n") in fixed


def test_comments_inside_a_replaced_expression_go_above_its_statement():
    text = ("import tensorflow as tf\nx = tf.constant([1.0, 2.0])\ny = x ** 2\n"
            "if True:\n"
            "    J = tf.stack([tf.gradients(y[i], x)[0]  # row i\n"
            "                  for i in range(2)])  # the Jacobian\n")
    fixed = migrate.fix_text(text)
    assert "    # row i\n    J = cg.stacked_jacobian(" in fixed
    assert fixed.endswith(", x)  # the Jacobian\n") and migrate.fix_text(fixed) == fixed


def test_names_follow_python_3_scopes():
    """Which `i` each occurrence means: the module's, or a comprehension's, a lambda's or a
    class body's own (a method skips its class; `global` reaches the module)."""
    from compat_grads.migrate import scopes

    tree = ast.parse("i = 0\n"
                     "a = [i for i in range(i)]\n"
                     "f = lambda i=i: i\n"
                     "class C:\n"
                     "    i = 1\n"
                     "    def m(self):\n"
                     "        return i\n"
                     "    j = i\n"
                     "def g():\n"
                     "    global i\n"
                     "    i = 2\n")
    refs = scopes.references(tree, {"i"})
    module_i = sorted((n.lineno, n.col_offset) for n in ast.walk(tree) if id(n) in refs)
    assert module_i == [(1, 0), (2, 22), (3, 13), (7, 15), (11, 4)]
    method = tree.body[3].body[1]
    assert scopes.bindings(tree.body[3]) == {"i": 1, "m": 1, "j": 1}
    assert scopes.bindings(method) == {"self": 1}
    assert scopes.assigned_value(tree.body[3], "j").id == "i"


def test_comments_of_deleted_statements_skip_unrelated_lines_to_their_rewrite():
    text = ("import tensorflow.compat.v1 as tf\n"
            "def derivative(U, x):\n"
            "    # a dummy cotangent\n"
            "    dummy = tf.ones_like(U)\n"
            "    g = tf.gradients(U, x, grad_ys=dummy)[0]\n"
            "    scale = 2.0\n"
            "    return scale * tf.gradients(g, dummy)[0]\n")
    assert migrate.fix_text(text).endswith(
        "    scale = 2.0\n    # a dummy cotangent\n"
        "    return scale * cg.per_element_gradients(U, tf.nest.flatten(x)[0])\n")


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
    bad = _bad(tmp_path, "a_bad.py", b"import tensorflow as tf\nboom = 1\n")
    good = _fixable(tmp_path)
    status = cli.main(["scan", str(bad), str(good)])
    captured = capsys.readouterr()
    assert status == 3 and f"{good}:" in captured.out
    assert (f"compat-grads scan: {bad}: internal error in compat-grads scan (AttributeError: "
            "'Name' object has no attribute 'value'); please report") in captured.err
    assert cli.main(["scan", "--fix", str(bad), str(good)]) == 3
    assert "cg.hessian(" in good.read_text("utf-8")


def test_an_unstack_loop_doing_more_than_collecting_rows_says_why():
    text = ("import tensorflow.compat.v1 as tf\n"
            "w = tf.Variable(tf.ones([3]))\n"
            "rows = []\n"
            "for ek in tf.unstack(w * 2.0):\n"
            "    rows.append(tf.gradients(ek, w)[0])\n"
            "    print(ek)\n"
            "J = tf.stack(rows)\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG101" and not found.edits
    assert "(not rewritten: the loop does more than collect the rows" in found.message


@pytest.mark.parametrize("between, why", [
    ("g = tf.ones([3])\n",
     "elements or a name of the tf.unstack(...) is bound again before the loop"),
    ("elements = tf.unstack(x)\n", "elements is bound more than once in this scope"),
], ids=["operand-rebound", "name-rebound"])
def test_rows_over_an_unstacked_name_rebound_are_reported_only(between, why):
    text = ("import tensorflow.compat.v1 as tf\n"
            "x = tf.ones([3])\n"
            "g = tf.gradients(tf.reduce_sum(tf.sin(x)), x)[0]\n"
            f"elements = tf.unstack(g)\n{between}"
            "rows = [tf.gradients(e, x)[0] for e in elements]\n"
            "H = tf.stack(rows)\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG101" and not found.edits and why in found.message
    assert migrate.fix_text(text) == text


def test_a_reshaped_row_is_the_reason_given():
    text = ("import tensorflow.compat.v1 as tf\n"
            "x = tf.ones([3])\ny = tf.sin(x)\n"
            "gs = [tf.reshape(tf.gradients(y[k], x)[0], [-1]) for k in range(3)]\n"
            "J = tf.stack(gs, axis=0)\n")
    (found,) = migrate.scan_text(text)
    assert not found.edits and "(not rewritten: each row goes through tf.reshape" in found.message
    assert "stacked along axis 0" not in found.message


def test_comments_of_a_loop_kept_as_a_list_go_above_its_replacement():
    text = ("import tensorflow.compat.v1 as tf\n"
            "def f(predictions, x, nb_classes):\n"
            "    list_derivatives = []\n"
            "    # one gradient per class\n"
            "    for class_ind in range(nb_classes):\n"
            "        (derivatives,) = tf.gradients(predictions[:, class_ind], x)  # the row\n"
            "        list_derivatives.append(derivatives)\n"
            "    return list_derivatives\n")
    fixed = migrate.fix_text(text)
    assert fixed.endswith("    # one gradient per class\n    # the row\n"
                          "    list_derivatives = cg.migrate.gradient_row_list(\n"
                          "        predictions, x, range(nb_classes), axis=1, index=None)\n"
                          "    return list_derivatives\n")


def test_long_rewrites_are_wrapped_within_100_columns():
    """A hanging indent when the arguments fit on one line, else one argument per line; the
    wrapped code parses and a second fix changes nothing (the exec tests run it)."""
    text = ("import tensorflow.compat.v1 as tf\n"
            "class Model:\n"
            "    def grads(self, label=None):\n"
            "        if label is None:\n"
            "            self._class_grads = [\n"
            "                tf.gradients(self._probabilities[:, i], self._input_placeholder)[0]\n"
            "                if self._class_grads[i] is None else self._class_grads[i]\n"
            "                for i in range(self._number_of_classes)]\n"
            "        h = tf.hessians(self._loss, self._input_placeholder)  # a long trailing "
            "comment stays\n")
    fixed = migrate.fix_text(text)
    assert max(len(line.partition("  #")[0]) for line in fixed.splitlines()) <= 100
    assert ("            self._class_grads = cg.migrate.gradient_row_list(\n"
            "                self._probabilities,\n") in fixed
    assert fixed.endswith("for x_ in tf.nest.flatten(self._input_placeholder)]  # a long "
                          "trailing comment stays\n")
    assert ast.parse(fixed) and migrate.fix_text(fixed) == fixed
