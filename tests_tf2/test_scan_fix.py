"""`compat-grads scan --fix` / `--diff`: what the rewrites write, where the import goes, how
comments and long lines survive, and that a second fix changes nothing."""

import ast
import dataclasses
import pathlib
import shutil

import pytest
from scan_support import CORPUS, expected, scan

from compat_grads import cli, migrate
from compat_grads.migrate import fixer, rules

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only


def test_fix_twice_is_idempotent_and_leaves_report_only_findings(tmp_path, capsys):
    tree = shutil.copytree(CORPUS, tmp_path / "corpus")
    _, first = scan(capsys, "--fix", tree)
    after = {p: p.read_bytes() for p in sorted(tree.iterdir())}
    status, second = scan(capsys, "--fix", tree)
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


def test_report_only_corpus_is_never_rewritten():
    """`y[..., i]`, a target recomputed per row and the rest of report_only.py: findings
    without a rewrite; --fix changes nothing."""
    text = (CORPUS / "report_only.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert len(found) == len(expected(CORPUS / "report_only.py"))
    assert [f for f in found if f.edits] == []
    assert migrate.fix_text(text) == text


def test_fix_error_names_the_line_and_column():
    text = "import tensorflow as tf\nh = tf.hessians(y, x)\n"
    finding = migrate.scan_text(text)[0]
    moved = dataclasses.replace(finding, edits=(dataclasses.replace(
        finding.edits[0], start=(2, 3), end=(2, 9)),))
    with pytest.raises(fixer.FixError, match=r"^no code found at line 2, column 4 to "
                                             r"rewrite$"):
        fixer.fix(text, [moved])


@pytest.mark.parametrize("name, unfixed", [("while_loop_jacobian.py", [58]),
                                           ("map_helper_jacobian.py", []),
                                           ("while_loop_programs.py", [])])
def test_while_loop_forms_call_the_runtime_checked_loop(name, unfixed):
    """The TensorArray loops (inline, or in a map helper of the module) get
    cg.migrate.row_while_loop in place of tf.while_loop, same arguments; the concatenating
    loop says why it is left alone; the fix is idempotent."""
    text = (CORPUS / name).read_text("utf-8")
    found = migrate.scan_text(text)
    assert sorted((None, f.line, f.code) for f in found) == sorted(expected(CORPUS / name))
    assert sorted(f.line for f in found if not f.edits) == unfixed
    for f in found:
        assert all(e.text.endswith(".migrate.row_while_loop") for e in f.edits)
    fixed = migrate.fix_text(text)
    assert fixed.count("cg.migrate.row_while_loop(") == len({e.start for f in found
                                                             for e in f.edits})
    assert ("tf.while_loop(" in fixed) == bool(unfixed) and migrate.fix_text(fixed) == fixed
    ast.parse(fixed)


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


def test_a_rewrite_on_a_continuation_line_wraps_past_that_line():
    """The JSMA form: the rows stacked as the first argument of a tf.reshape broken across
    lines; the wrapped rewrite indents past the argument's own line (PEP 8's hanging
    indent), not back at it."""
    fixed = migrate.fix_text((CORPUS / "wrapped_call_argument.py").read_text("utf-8"))
    assert ("    grads = tf.reshape(\n"
            "        cg.migrate.gradient_rows(\n"
            "            model_logits,\n"
            "            input_placeholder,\n"
            "            range(number_of_classes),\n"
            "            axis=1), shape=[number_of_classes, -1, number_of_features]\n"
            "    )\n") in fixed
    assert max(len(line) for line in fixed.splitlines()) <= 100
    assert ast.parse(fixed) and migrate.fix_text(fixed) == fixed


def test_rows_flattened_before_the_stack_are_gradient_rows_flat():
    """DeepFool's `[tf.reshape(tf.gradients(y[i], x)[0], [-1]) for i ...]` stacked: one
    helper call with flat=True, in a for loop, a comprehension and inline in tf.stack; the
    same rows kept as a list are reported only, and say what is rewritten."""
    text = (CORPUS / "flattened_rows.py").read_text("utf-8")
    fixed = migrate.fix_text(text)
    assert "    g = cg.migrate.gradient_rows(y, xadv, range(classes), flat=True)\n" in fixed
    assert "matrix = cg.migrate.gradient_rows(logits, image, range(classes), flat=True)\n" in fixed
    assert "inline = cg.migrate.gradient_rows(logits, image, range(classes), flat=True)\n" in fixed
    (kept,) = [f for f in migrate.scan_text(fixed)]
    assert not kept.edits and "tf.reshape(row, [-1]) in rows stacked right away" in kept.message
    assert migrate.fix_text(fixed) == fixed


def test_gradient_rows_flat_equals_the_flattened_loop_in_a_graph():
    """Both routes of `gradient_rows(..., flat=True)`: the one Jacobian reshaped to
    [rows, -1] and the loop (a source gathered from keeps the loop) give the loop's rows."""
    import numpy as np
    import tensorflow as tf

    with tf.Graph().as_default():
        x = tf.constant(np.random.RandomState(0).rand(2, 3, 2), tf.float32)
        table = tf.Variable(np.random.RandomState(1).rand(5, 3), dtype=tf.float32)
        y = tf.reshape(tf.tanh(tf.reduce_sum(x, 2)) * 3.0, [-1])
        z = tf.reshape(tf.gather(table, [0, 2]), [-1])
        want = [tf.stack([tf.reshape(tf.compat.v1.gradients(t[i], s)[0], [-1])
                          for i in range(4)]) for t, s in ((y, x), (z, table))]
        got = [migrate.gradient_rows(t, s, range(4), flat=True) for t, s in ((y, x), (z, table))]
        assert [g.shape.as_list() for g in got] == [[4, 12], [4, 15]]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want = session.run([got, want])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_the_helpers_run_unconverted_inside_a_map_fn(monkeypatch):
    """tf.map_fn converts its fn with AutoGraph, and whatever the fn calls that AutoGraph
    does not know (the per-image DeepFool builds its class rows there): the helpers --fix
    writes are hidden from it, as the public functions and tf.gradients are, so they run
    as written (converting them took seconds of each build)."""
    import sys

    import numpy as np
    import tensorflow as tf

    from compat_grads.migrate.runtime import loops, rows

    callers, one_row, vectorized = [], rows._loop, loops._vectorized_loop

    def spy(real):  # who calls it: the helper's own module, or AutoGraph's converted_call
        def recorded(*args):
            callers.append(pathlib.Path(sys._getframe(1).f_code.co_filename).name)
            return real(*args)
        return recorded

    monkeypatch.setattr(rows, "_loop", spy(one_row))
    monkeypatch.setattr(loops, "_vectorized_loop", spy(vectorized))

    def per_image(image):
        y = tf.reshape(tf.tanh(image) * 2.0, [-1])
        rows_kept = migrate.gradient_row_list(y, image, range(3))
        count = tf.size(y)
        _, array = migrate.row_while_loop(
            lambda i, _: i < count,
            lambda i, acc: (i + 1, acc.write(i, tf.reshape(tf.gradients(y[i], image)[0], [-1]))),
            [0, tf.TensorArray(tf.float32, size=count)])
        return tf.reduce_sum(tf.stack(rows_kept)) + tf.reduce_sum(array.stack())

    with tf.Graph().as_default():
        images = tf.constant(np.random.RandomState(0).rand(2, 2, 2), tf.float32)
        total = tf.compat.v1.map_fn(per_image, images)
        with tf.compat.v1.Session() as session:
            got = session.run(total)
    assert callers == ["rows.py", "loops.py"]
    slopes = 2 * (1 - np.tanh(np.random.RandomState(0).rand(2, 2, 2)) ** 2)
    flat = slopes.reshape(2, 4)  # rows 0-2 kept as a list, then all four in the loop
    np.testing.assert_allclose(got, flat[:, :3].sum(1) + flat.sum(1), rtol=1e-5)


def test_laplacian_loops_become_one_call_with_the_loops_values():
    """The sum over every column is the Laplacian, over the first n columns those columns of
    the diagonal summed; `lap = 0` goes with its loop; the diagonal stacked dimension first
    is transposed. A `u` of shape [b] computed row by row from `x` takes the shortest calls;
    samples that may interact (a batch mean) keep the loop's values with the divergence of
    its own gradient `g` (the Hessian's symmetry; not built a second time) and the
    diagonal with strategy="reverse"; a `u` of unproved shape is summed per sample first."""
    text = ("import tensorflow.compat.v1 as tf\n"
            "d = 3\n"
            "x = tf.placeholder(tf.float32, [None, d])\n"
            "u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)\n"
            "g = tf.gradients(u, x)[0]\n"
            "lap = 0\n"
            "for i in range(d):\n"
            "    lap += tf.gradients(g[:, i], x)[0][:, i]\n"
            "first = sum(tf.gradients(g[:, i], x)[0][:, i] for i in range(2))\n"
            "rows = tf.map_fn(lambda i: tf.gradients(g[:, i], x)[0][:, i], tf.range(d),\n"
            "                 dtype=tf.float32)\n")
    target = "tf.reduce_sum(u, axis=tf.range(1, tf.rank(u)))"
    assert migrate.fix_text(text) == (
        "import tensorflow.compat.v1 as tf\n"
        "import compat_grads as cg\n"
        "d = 3\n"
        "x = tf.placeholder(tf.float32, [None, d])\n"
        "u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)\n"
        "g = tf.gradients(u, x)[0]\n"
        "lap = cg.batch_laplacian(u, x)\n"
        "first = tf.reduce_sum(cg.batch_hessian_diagonal(u, x)[:, :2], axis=1)\n"
        "rows = tf.transpose(cg.batch_hessian_diagonal(u, x))\n")
    coupled = text.replace("axis=1)\n", "axis=1) * tf.reduce_mean(x)\n", 1)
    lines = migrate.fix_text(coupled).splitlines()
    assert lines[6:] == [
        "lap = cg.batch_divergence(g, x)",
        'first = tf.reduce_sum(cg.batch_hessian_diagonal(u, x, strategy="reverse")[:, :2], axis=1)',
        'rows = tf.transpose(cg.batch_hessian_diagonal(u, x, strategy="reverse"))']
    unknown = text.replace("u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)", "u = model(x)")
    assert f"rows = tf.transpose(\n    cg.batch_hessian_diagonal(\n        {target},\n" in (
        migrate.fix_text(unknown))


def test_a_long_indexed_call_in_a_rewrite_wraps_its_arguments():
    text = ("import tensorflow.compat.v1 as tf\n"
            "inputs_of_the_network = tf.placeholder(tf.float32, [None, 4])\n"
            "outputs_of_the_network = model(inputs_of_the_network)  # shape not proved\n"
            "g = tf.gradients(outputs_of_the_network, inputs_of_the_network)[0]\n"
            "lap = sum(tf.gradients(g[:, i], inputs_of_the_network)[0][:, i] for i in range(2))\n")
    fixed = migrate.fix_text(text)
    assert max(len(line) for line in fixed.splitlines()) <= 100
    assert "        strategy=\"reverse\")[:, :2],\n    axis=1)\n" in fixed
    assert migrate.fix_text(fixed) == fixed


def test_mapped_terms_summed_on_the_next_line_become_the_laplacian_there():
    """The quantum Monte Carlo form: the terms of tf.map_fn assigned, then summed over the
    mapped axis; the assignment goes, the sum becomes the call. Used twice, they stay the
    (transposed) diagonal."""
    head = ("import tensorflow.compat.v1 as tf\n"
            "x = tf.placeholder(tf.float64, [None, 6])\n"
            "u = tf.reduce_sum(tf.cos(x), axis=1)\n"
            "g = tf.gradients(u, x)[0]\n"
            "terms = tf.map_fn(\n"
            "    lambda i: tf.gradients(tf.expand_dims(g[..., i], -1), x)[0][..., i],\n"
            "    tf.range(x.shape[1]), dtype=tf.float64)\n")
    fixed = migrate.fix_text(head + "kinetic = -0.5 * (tf.reduce_sum(terms, axis=0) + 1.0)\n")
    assert "terms" not in fixed and "tf.map_fn" not in fixed
    assert fixed.endswith(
        "g = tf.gradients(u, x)[0]\n"
        "kinetic = -0.5 * (cg.batch_laplacian(u, x) + 1.0)\n")
    twice = migrate.fix_text(head + "a = tf.reduce_sum(terms, axis=0)\nb = terms[0]\n")
    assert "terms = tf.transpose(" in twice and "b = terms[0]" in twice


_LAP_HEAD = ("import tensorflow.compat.v1 as tf\n"
             "x = tf.placeholder(tf.float64, [None, 3])\n"
             "w = tf.ones([3, 2], tf.float64)\n")
_LAP = "lap = sum(tf.gradients(u_x[:, i], x)[0][:, i] for i in range(3))\n"


@pytest.mark.parametrize("body, why", [
    # u may be another tensor at the loop than where u_x was taken: left as it is
    ("outs = [tf.matmul(tf.sin(x), w)]\nu_x = tf.gradients(outs[-1], x)[0]\n"
     "outs.append(outs[0] ** 2)\n" + _LAP, "moved"),
    ("outs = [tf.matmul(tf.sin(x), w)]\nu_x = tf.gradients(outs[0], x)[0]\n"
     "outs[0] = outs[0] * 10.0\n" + _LAP, "moved"),
    ('T = {"u": tf.matmul(tf.sin(x), w)}\nu_x = tf.gradients(T["u"], x)[0]\n'
     'T["u"] = tf.sin(T["u"])\nlap = 0\nfor i in range(3):\n'
     "    lap += tf.gradients(u_x[:, i], x)[0][:, i]\n", "moved"),
    ("for k in range(2):\n    u = tf.matmul(tf.sin(x), w) * (k + 1.0)\n    if k == 0:\n"
     "        u_x = tf.gradients(u, x)[0]\n" + _LAP, "moved"),
    ("class S:\n    pass\ns = S()\ns.u = tf.matmul(tf.sin(x), w)\n"
     'u_x = tf.gradients(s.u, x)[0]\nsetattr(s, "u", s.u * 5.0)\n' + _LAP, "moved"),
    ("u = tf.matmul(tf.sin(x), w)\nu_x = tf.gradients(u, x)[0]\nu = u * 2.0\n" + _LAP,
     "impure"),
    ("u = tf.matmul(tf.sin(x), w)\n\ndef scale():\n    global u\n    u = u * 2.0\n\n"
     "u_x = tf.gradients(u, x)[0]\nscale()\n" + _LAP, "impure"),
    # no batch axis first: the rewritten call would raise where the loop runs
    ("u = tf.reduce_sum(tf.matmul(tf.sin(x), w))\nu_x = tf.gradients(u, x)[0]\n" + _LAP,
     "scalar"),
    ("u = tf.reduce_mean(tf.sin(x) ** 2)\n"
     "lap = sum(tf.gradients(tf.gradients(u, x)[0][:, i], x)[0][:, i] for i in range(3))\n",
     "scalar"),
    ("u = tf.reduce_sum(tf.sin(x), axis=0)\nu_x = tf.gradients(u, x)[0]\n" + _LAP, "scalar"),
    ("u1 = tf.reduce_sum(tf.sin(x), 1); u2 = tf.reduce_sum(x ** 3, 1)\n"
     "lap = sum(tf.gradients(tf.gradients([u1, u2], x)[0][:, i], x)[0][:, i]\n"
     "          for i in range(3))\n", "scalar"),
    # the fix deletes whole lines: `lap = 0` sharing one with `n = 3` is left as it is
    ("u = tf.matmul(tf.sin(x), w)\nu_x = tf.gradients(u, x)[0]\nn = 3; lap = 0\n"
     "for i in range(n):\n    lap += tf.gradients(u_x[:, i], x)[0][:, i]\n", "shared"),
])
def test_laplacian_loops_the_fix_cannot_prove_are_reported_and_left(body, why):
    text = _LAP_HEAD + body
    (found,) = migrate.scan_text(text)
    reason = rules.cg111_laplacian_loop.WHY_NOT[why]
    assert found.code == "CG111" and not found.edits
    assert f"(not rewritten: {reason})" in found.message
    assert migrate.fix_text(text) == text


def test_laplacian_loops_of_a_bound_u_the_fix_proves_are_rewritten():
    """A store to u before u_x's assignment, and a loop that holds both the binding and the
    Laplacian's loop, keep u the same tensor at the loop."""
    once = "u = tf.matmul(tf.sin(x), w)\nu_x = tf.gradients(u, x)[0]\n" + _LAP
    looped = ("for k in range(2):\n    u = tf.matmul(tf.sin(x), w) * (k + 1.0)\n"
              "    u_x = tf.gradients(u, x)[0]\n    " + _LAP)
    for text in (_LAP_HEAD + once, _LAP_HEAD + looped):
        (found,) = migrate.scan_text(text)
        assert found.edits and "cg.batch_divergence(" in migrate.fix_text(text)


def test_a_loop_over_the_slabs_of_a_rank_three_x_is_no_laplacian():
    """`g[:, i]` of a rank-3 x is a slab: CG111 says nothing, and nothing is rewritten."""
    text = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [None, 4, 3])\n"
            "g = tf.gradients(tf.reduce_sum(tf.sin(x), [1, 2]), x)[0]\n"
            "slabs = sum(tf.gradients(g[:, i], x)[0][:, i] for i in range(4))\n")
    found = migrate.scan_text(text)
    assert found and "CG111" not in {f.code for f in found}
    assert not [f for f in found if "Laplacian" in f.message or f.edits]
    assert migrate.fix_text(text) == text


def test_a_hessian_vector_product_becomes_cg_hvp_of_the_loss_expression():
    """The double tf.gradients HVP of issue 46's reproducer: cg.hvp of a lambda computing
    the loss from w, the vector as written (tf.stop_gradient kept); not indexed, a list of
    one, as tf.gradients returns; a loss that is no scalar summed, as tf.gradients sums it."""
    head = ("import tensorflow.compat.v1 as tf\n"
            "x = tf.placeholder(tf.float32, [None, 3]); w = tf.Variable(tf.ones([3]))\n"
            "loss = tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)\n"
            "g = tf.gradients(loss, w)[0]; v = tf.placeholder(tf.float32, [3])\n")
    fixed = migrate.fix_text(head + "hv = tf.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), "
                                    "w)[0]\n")
    assert fixed.endswith("hv = cg.hvp(lambda w: tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) "
                          "** 2), w, tf.stop_gradient(v))\n")
    listed = migrate.fix_text(head + "hv = tf.gradients(tf.tensordot(v, g, 1), w)\n")
    assert listed.endswith("hv = [cg.hvp(lambda w: tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, "
                           "1)) ** 2), w, v)]\n")
    rows = migrate.fix_text(head.replace("tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)",
                                         "tf.tanh(x * w)") + "hv = tf.gradients("
                            "tf.reduce_sum(tf.multiply(g, v)), w)[0]\n")
    assert rows.endswith("hv = cg.hvp(lambda w: tf.reduce_sum(tf.tanh(x * w)), w, v)\n")
    assert migrate.fix_text(fixed) == fixed


@pytest.mark.parametrize("rows, call", [
    ("tf.stack([tf.gradients(y[i], x)[0] for i in range(4)])", "cg.stacked_jacobian(y[:4], x)"),
    ("tf.stack([tf.gradients(y[i], x)[0] for i in range(6)])", "cg.stacked_jacobian(y, x)"),
    ("tf.stack([tf.gradients(g[i], w)[0] for i in range(3)])", "cg.hessian(loss, w)"),
    ("tf.stack([tf.gradients(g[i], w)[0] for i in range(2)])", "cg.hessian(loss, w)[:2]"),
    ("tf.stack([tf.gradients(r, w)[0] for r in tf.unstack(g)])", "cg.hessian(loss, w)"),
    ("tf.stack([tf.gradients(r, w)[0] for r in tf.unstack(tf.gradients(2.0 * loss, w)[0])])",
     "cg.hessian(tf.reduce_sum(2.0 * loss), w)"),
], ids=["first-rows-of-a-vector", "vector", "hessian", "hessian-first-rows", "hessian-unstack",
        "hessian-inline"])
def test_rows_the_shapes_prove_get_the_shortest_call(rows, call):
    """A vector's rows need no row sums, and the rows of a gradient with respect to a
    vector of weights are the Hessian's; with shapes not proved, the row sums stay."""
    head = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [6])\n"
            "y = tf.sin(x) * tf.reduce_sum(x ** 2)\nw = tf.Variable(tf.ones([3]))\n"
            "loss = tf.reduce_sum(tf.sin(w) ** 2)\ng = tf.gradients(loss, w)[0]\n")
    (found,) = migrate.scan_text(head + f"J = {rows}\n")
    assert [e.text for e in found.edits] == [call]
    unknown = head.replace("tf.placeholder(tf.float32, [6])", "tf.placeholder(tf.float32)")
    unknown = unknown.replace("tf.Variable(tf.ones([3]))", "tf.Variable(init)")
    (kept,) = migrate.scan_text(unknown + f"J = {rows}\n")
    assert "cg.hessian" not in kept.message and (
        "tf.reduce_sum(" in kept.message or "gradient_rows(" in kept.message)


def test_a_map_fn_with_back_prop_false_is_rewritten_under_stop_gradient():
    text = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [None, 3])\n"
            "u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)\ng = tf.gradients(u, x)[0]\n"
            "lap = tf.reduce_sum(tf.map_fn(lambda i: tf.gradients(g[:, i], x)[0][:, i],\n"
            "                              tf.range(3), dtype=tf.float32, back_prop=False), 0)\n")
    assert migrate.fix_text(text).endswith("lap = tf.stop_gradient(cg.batch_laplacian(u, x))\n")
    kept = text.replace("back_prop=False", "back_prop=True")
    assert migrate.fix_text(kept).endswith("lap = cg.batch_laplacian(u, x)\n")
