"""The scanner's rules: what each finds (and does not), the reasons a finding gives for not
being rewritten, and the name resolution (aliases, scopes, notebook cells) they share."""

import ast
import json
import pathlib
import re
import textwrap

import numpy as np
import pytest
from scan_support import CORPUS, expected, scan

from compat_grads import migrate
from compat_grads.migrate import names as migrate_names
from compat_grads.migrate import rules


def test_module_aliases_assigned_to_names_are_tracked():
    text = ("import tensorflow as tf\nK = tf.keras.backend\ntf = tf.compat.v1\n"
            "x = tf.placeholder(tf.float32, [2])\ng = K.gradients(tf.reduce_sum(x), x)\n"
            "h = tf.hessians(x ** 3, x)\n")
    assert [f.code for f in migrate.scan_text(text)] == ["CG108", "CG105"]
    shadowed = text.replace("K = tf.keras.backend\n", "K = tf.keras.backend\nK = object()\n")
    assert [f.code for f in migrate.scan_text(shadowed)] == ["CG105"]


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
    assert len(found) == len(expected(CORPUS / name)) and not [f for f in found if f.edits]
    assert all("(not rewritten: " in f.message for f in found
               if f.code in ("CG106", "CG109", "CG110"))
    assert migrate.fix_text(text) == text


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
    status, report = scan(capsys, path)
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
    status, report = scan(capsys, path)
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


def test_per_point_gradients_of_a_physics_network_are_not_reported():
    text = (CORPUS / "clean_pinn.py").read_text("utf-8")
    assert text.count("tf.gradients(") == 7 and migrate.scan_text(text) == []


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
    """A row reshaped to another shape than [-1] is reported, and says why; flattened to
    [-1] and stacked it is rewritten (gradient_rows(..., flat=True))."""
    text = ("import tensorflow.compat.v1 as tf\n"
            "x = tf.ones([3])\ny = tf.sin(x)\n"
            "gs = [tf.reshape(tf.gradients(y[k], x)[0], [1, -1]) for k in range(3)]\n"
            "J = tf.stack(gs, axis=0)\n")
    (found,) = migrate.scan_text(text)
    assert not found.edits and "(not rewritten: each row goes through tf.reshape" in found.message
    assert "stacked along axis 0" not in found.message
    (flat,) = migrate.scan_text(text.replace("[1, -1]", "[-1]"))
    assert flat.edits and "gradient_rows(y, x, range(3), flat=True)" in flat.message


def test_every_rule_module_holds_its_code_messages_and_docs():
    """A rule is written in one module, `cgNNN_<name>.py`, which the rule list registers,
    and the code table is made from them."""
    package = pathlib.Path(rules.__file__).parent
    files = sorted(p.stem for p in package.glob("cg*.py"))
    assert files == [m.__name__.rpartition(".")[2] for m in rules.MODULES]
    for module in rules.MODULES:
        rule = module.RULE
        assert module.__name__.endswith(f"{rule.code.lower()}_{rule.name.replace('-', '_')}")
        assert rule.summary and rule.messages and all(rule.messages.values()), rule.code
        assert rule.docs.strip() and rule.docs == module.DOCS, rule.code
        assert rule.visits in ("rows", "nodes", "gradients"), rule.code
        assert rule.fixable == (rule.fix != "report only"), rule.code
    assert migrate.CODES == {r.code: r for r in rules.RULES}
    assert [c.code for c in migrate.CODES.values()] == [f"CG1{n:02d}" for n in range(1, 14)]


def test_the_docs_rule_list_is_made_from_every_rule():
    """docs/scan.rst writes no rule by hand: its `scan-rules` directive renders each rule's
    heading and docs from the rule modules."""
    page = (CORPUS.parents[1] / "docs" / "scan.rst").read_text("utf-8")
    assert page.count(".. scan-rules::") == 1
    assert not re.search(r"^CG1\d\d ", page, re.MULTILINE)
    lines = rules.rst_lines()
    for rule in rules.RULES:
        at = lines.index(rule.heading)
        body = [line.removeprefix("   ") for line in lines[at + 1:at + 1 + len(
            rule.docs.splitlines())]]
        assert body == rule.docs.splitlines(), rule.code


def test_a_map_fn_differentiating_a_value_computed_from_its_element_works():
    """The per-image DeepFool: gradients with respect to `xadv = tf.expand_dims(image, 0)`
    never reach the element's TensorArray read, so CG103 says the map works (slowly), not
    that it fails at run time."""
    (found,) = migrate.scan_text(
        (CORPUS / "per_image_rows_map_fn.py").read_text("utf-8"))
    assert found.code == "CG103" and found.edits
    assert "it works, slowly" in found.message and "fails at run time" not in found.message


# -- CG111: per-dimension Laplacians and Hessian diagonals --------------------------------

LAPLACIAN_FILES = ["laplacian_pinn_sum.py", "laplacian_add_n_accumulate.py",
                   "hessian_diagonal_stack.py", "laplacian_map_fn.py"]
_HEAD = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [None, 3])\n"
         "u = tf.reduce_sum(tf.sin(x) ** 2, axis=1)\ng = tf.gradients(u, x)[0]\n")
_TERM = "tf.gradients(g[:, i], x)[0][:, i]"


@pytest.mark.parametrize("name", LAPLACIAN_FILES)
def test_laplacian_loops_are_cg111_only_and_rewritten(name):
    """CG111 owns the gradient calls of its forms: no CG101, CG102 or CG103 besides."""
    found = migrate.scan_text((CORPUS / name).read_text("utf-8"))
    assert found and {f.code for f in found} == {"CG111"}
    assert len(found) == len(expected(CORPUS / name)) and all(f.edits for f in found)
    assert all('strategy="reverse"' in f.message and "independent=False" in f.message
               for f in found)


@pytest.mark.parametrize("line, kind, what, use", [
    (f"lap = sum({_TERM} for i in range(3))\n", "Laplacian", "generator",
     "cg.batch_laplacian(u, x);"),
    (f"lap = tf.add_n([{_TERM} for i in range(x.shape[1])])\n", "Laplacian",
     "list comprehension", "cg.batch_laplacian(u, x);"),
    (f"lap = 0\nfor i in range(2):\n    lap += {_TERM}\n", "Laplacian", "for loop",
     "tf.reduce_sum(cg.batch_hessian_diagonal(u, x)[:, :2], axis=1);"),
    (f"D = tf.stack([{_TERM} for i in range(3)], axis=1)\n", "Hessian diagonal",
     "list comprehension", "cg.batch_hessian_diagonal(u, x);"),
    ("D = tf.map_fn(lambda i: tf.gradients(g[..., i], x)[0][..., i], tf.range(3),\n"
     "              dtype=tf.float32)\n", "Hessian diagonal", "tf.map_fn",
     "tf.transpose(cg.batch_hessian_diagonal(u, x));"),
    ("lap = 0\nfor i in range(3):\n    h = tf.gradients(g[:, i], x)[0]\n    lap += h[:, i]\n",
     "Laplacian", "for loop", "cg.batch_laplacian(u, x);"),
    ("rows = tf.map_fn(lambda i: tf.gradients(tf.expand_dims(g[..., i], -1), x)[0][..., i],\n"
     "                 tf.range(3), dtype=tf.float32)\nlap = -0.5 * tf.reduce_sum(rows, 0)\n",
     "Laplacian", "tf.map_fn", "cg.batch_laplacian(u, x);"),
])
def test_laplacian_loop_messages_name_the_form_and_the_call(line, kind, what, use):
    """`u` of shape [b], computed row by row from `x`: the rewrite is the shortest call,
    `g` taken once before the loop: one tf.gradients graph per dimension."""
    (found,) = migrate.scan_text(_HEAD + line)
    assert found.code == "CG111" and found.edits
    assert found.line == 5 + line.startswith("lap = 0\n")  # at the loop, after `lap = 0`
    assert found.message.startswith(f"hand-built {kind}: one tf.gradients graph per "
                                    f"dimension in a {what}; use {use}")


def test_laplacian_report_only_forms_say_why_and_stay_as_they_are():
    text = (CORPUS / "laplacian_report_only.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert [f.code for f in found] == ["CG111"] * len(expected(
        CORPUS / "laplacian_report_only.py"))
    why = rules.cg111_laplacian_loop.WHY_NOT
    reasons = {key for f in found for key, reason in why.items()
               if f"(not rewritten: {reason})" in f.message}
    assert reasons == set(why) and not [f for f in found if f.edits]
    assert migrate.fix_text(text) == text


@pytest.mark.parametrize("line, codes", [
    (f"lap = sum({_TERM} for i in range(3))\n", ["CG111"]),
    ("lap = sum(tf.gradients(g[:, i], x)[0][:, 0] for i in range(3))\n", ["CG101"]),
    (f"D = tf.stack([{_TERM} for i in range(3)])\n", ["CG111"]),
    ("D = tf.stack([tf.gradients(g[:, i], u)[0] for i in range(3)])\n", ["CG102"]),
    (f"D = tf.map_fn(lambda i: {_TERM}, tf.range(3), dtype=tf.float32)\n", ["CG111"]),
    ("D = tf.map_fn(lambda i: tf.gradients(g[:, i], x)[0], tf.range(3), dtype=tf.float32)\n",
     ["CG103"]),
    ("h = tf.gradients(g[:, 1], x)[0][:, 1]\n", []),
    ("for i in range(3):\n    h = tf.gradients(g[:, i], x)[0]\n"
     "    s = tf.reduce_sum(h ** 2, axis=1)\n", ["CG101"]),
    ("def column(i):\n    return tf.gradients(g[:, i], x)[0][:, i]\n", []),
])
def test_cg111_takes_its_terms_and_leaves_the_look_alikes(line, codes):
    assert [f.code for f in migrate.scan_text(_HEAD + line)] == codes


@pytest.mark.parametrize("head, rewritten", [
    ("x = tf.placeholder(tf.float32, [None, 3])\n", True),
    ("x = tf.placeholder(tf.float32, shape=(None, 3))\n", True),
    ("x = tf.reshape(tf.ones([6]), [2, 3])\n", True),
    ("a = tf.placeholder(tf.float32, [None, 1])\nx = tf.concat([a, a, a], axis=1)\n", True),
    ("x = tf.reshape(tf.ones([6]), shape)\n", False),  # the shape is not written out
    ("x = tf.placeholder(tf.float32, [None, 3])\nx = tf.sin(x)\n", False),  # two bindings
    ("a = tf.placeholder(tf.float32, [None, 1])\nx = tf.concat([a, a], axis=0)\n", False),
    ("x = tf.placeholder(tf.float32)\n", False),
])
def test_laplacian_rewrites_need_x_of_provable_rank_two(head, rewritten):
    text = ("import tensorflow.compat.v1 as tf\n" + head
            + "u = tf.reduce_sum(x ** 3, axis=1)\ng = tf.gradients(u, x)[0]\n"
            + f"lap = sum({_TERM} for i in range(3))\n")
    (found,) = migrate.scan_text(text)
    assert found.code == "CG111" and bool(found.edits) is rewritten
    assert ("x is not provably of rank 2" in found.message) is not rewritten


def test_a_parameter_hides_the_module_x_and_width():
    """`x` and `d` of a function are not the module's placeholder and its width."""
    text = ("import tensorflow.compat.v1 as tf\nd = 3\nx = tf.placeholder(tf.float32, "
            "[None, d])\n\ndef lap(x, u):\n    g = tf.gradients(u, x)[0]\n"
            f"    return sum({_TERM} for i in range(d))\n\n"
            "def lap_first(u, d):\n    g = tf.gradients(u, x)[0]\n"
            f"    return sum({_TERM} for i in range(d))\n")
    shadowed, sliced = migrate.scan_text(text)
    assert not shadowed.edits and "x is not provably of rank 2" in shadowed.message
    assert sliced.edits and sliced.edits[0].text.endswith("[:, :d], axis=1)")


def test_a_parameter_hides_the_u_the_first_gradient_was_taken_of():
    """`g` of the module differentiates the module's `u`: a function whose own `u` is a
    parameter cannot have `u` written into its rewrite."""
    text = ("import tensorflow.compat.v1 as tf\nx = tf.placeholder(tf.float32, [None, 3])\n"
            "u = tf.reduce_sum(tf.sin(x), axis=1)\ng = tf.gradients(u, x)[0]\n\n"
            f"def lap(u):\n    return sum({_TERM} for i in range(3))\n\n"
            f"def lap_module():\n    return sum({_TERM} for i in range(3))\n")
    shadowed, module = migrate.scan_text(text)
    assert not shadowed.edits and "may be rebound before the loop" in shadowed.message
    assert module.edits


def test_a_stacked_jacobian_diagonal_is_advised_as_a_divergence():
    """`tf.gradients(y[:, k], x)[0][:, k]` stacked is the Jacobian's diagonal: the advice is
    the divergence (not a stacked Jacobian of another shape) and nothing is rewritten; rows
    of whole gradients keep the Jacobian advice."""
    text = (CORPUS / "jacobian_diagonal_stack.py").read_text()
    found = sorted(migrate.scan_text(text), key=lambda f: f.line)
    assert [f.code for f in found] == ["CG102"] * 3
    for diagonal in found[:2]:
        assert "Jacobian diagonal" in diagonal.message and not diagonal.edits
        assert "cg.batch_divergence(y, x)" in diagonal.message
        assert "stacked_jacobian" not in diagonal.message
    assert "hand-built Jacobian:" in found[2].message


# -- issue 46: the idioms the scanner missed ------------------------------------------------

REPRODUCER = """\
import numpy as np, tensorflow.compat.v1 as tf
from tensorflow.python.ops import array_ops_stack
tf.disable_v2_behavior()
x = tf.placeholder(tf.float32, [None, 3]); w = tf.Variable(tf.ones([3]))
loss = tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)
g = tf.gradients(loss, w)[0]; v = tf.placeholder(tf.float32, [3])
hv = tf.gradients(tf.reduce_sum(g * tf.stop_gradient(v)), w)[0]
H = array_ops_stack.stack([tf.gradients(r, w)[0] for r in array_ops_stack.unstack(g)])
with tf.Session() as s:
    s.run(tf.global_variables_initializer()); data = np.random.rand(5, 3)
    per_example = [s.run(g, {x: data[i:i + 1]}) for i in range(5)]
"""


def test_the_three_unscanned_idioms_are_found_with_their_calls():
    """An HVP by double tf.gradients, Hessian rows through array_ops_stack and a loop of
    one-example session runs: each found, with the call to write in the code's names."""
    hvp, rows, runs = migrate.scan_text(REPRODUCER)
    assert [(f.line, f.code) for f in (hvp, rows, runs)] == [
        (7, "CG112"), (8, "CG102"), (11, "CG113")]
    assert hvp.edits and "use cg.hvp(lambda w: tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) " \
        "** 2), w, tf.stop_gradient(v))" in hvp.message
    assert rows.edits and "use cg.hessian(loss, w)" in rows.message
    assert not runs.edits and "cg.per_example_gradients(loss_fn, model, x, y, weights=[w])" in (
        runs.message)


@pytest.mark.parametrize("imports, stack, unstack", [
    ("from tensorflow.python.ops import array_ops_stack\n", "array_ops_stack.stack",
     "array_ops_stack.unstack"),
    ("from tensorflow.python.ops.array_ops_stack import stack, unstack\n", "stack", "unstack"),
    ("from tensorflow.python.ops import array_ops\n", "array_ops.pack", "array_ops.unpack"),
    ("import tensorflow.python.ops.array_ops as ops\n", "ops.stack", "ops.unstack"),
], ids=["array_ops_stack", "imported-names", "pack-unpack", "array_ops-module"])
def test_private_stack_and_unstack_are_found_as_the_public_ones(imports, stack, unstack):
    """TensorFlow's private spellings of tf.stack / tf.unstack give the findings and
    rewrites of the public ones (CG102 over unstacked rows, CG101 over a named unstack)."""
    body = ("x = tf.placeholder(tf.float32, [4])\ny = tf.sin(x) * x\n"
            "J = {stack}([tf.gradients(r, x)[0] for r in {unstack}(y)])\n"
            "elements = {unstack}(y)\nrows = [tf.gradients(e, x)[0] for e in elements]\n"
            "K = {stack}(rows)\n")
    public = "import tensorflow.compat.v1 as tf\n" + body.format(stack="tf.stack",
                                                                unstack="tf.unstack")
    private = "import tensorflow.compat.v1 as tf\n" + imports + body.format(
        stack=stack, unstack=unstack)
    want = [(f.code, [e.text for e in f.edits]) for f in migrate.scan_text(public)]
    got = [(f.code, [e.text for e in f.edits]) for f in migrate.scan_text(private)]
    assert [code for code, _ in want] == ["CG102", "CG101"] and got == want


def test_hvp_forms_say_what_to_write_and_why_they_are_not_rewritten():
    text = (CORPUS / "hvp_double_gradients.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert {f.code for f in found} == {"CG112"}
    assert [bool(f.edits) for f in found] == [True] * 4 + [False] * 4
    reasons = [f.message.partition("(not rewritten: ")[2] for f in found[4:]]
    assert reasons[0].startswith("deep_loss is not an expression of w and of placeholders")
    assert "def loss_fn(w): ... return loss, then cg.hvp(loss_fn, w, v)" in reasons[0]
    assert reasons[1].startswith("w * 2.0 is not provably independent of w")
    assert reasons[2].startswith("scale is not provably of w's shape")
    assert reasons[3].startswith("ys is a parameter of hessian_times, so the loss is built "
                                 "where hessian_times is called")
    assert all("cg.hvp(f, w, v) takes the loss as a function f of the weights" in f.message
               for f in found)


def test_per_example_session_runs_are_reported_in_the_codes_names():
    text = (CORPUS / "per_example_session_runs.py").read_text("utf-8")
    found = migrate.scan_text(text)
    assert [f.code for f in found] == ["CG113"] * 3 and not [f for f in found if f.edits]
    first, listed, pair = found
    assert first.message.startswith(
        "per-example gradients by one sess.run per example (g fed x one example of data at a "
        "time); use cg.per_example_gradients(loss_fn, model, x, y, weights=[w]) and run it "
        "once over the whole batch ({x: data})")
    assert "weights=[w, b]" in listed.message and "([loss, g] fed x" in pair.message
    assert all("a loss without labels takes y=x and ignores y_true" in f.message
               for f in found)
    assert migrate.fix_text(text) == text


def test_the_per_example_advice_gives_the_loops_gradients():
    """CG113's docs example, run: cg.per_example_gradients with the model and the loss as
    functions gives what the loop of one-example session runs gives."""
    import tensorflow as tf

    docs = rules.cg113_per_example_session_runs.DOCS
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", docs)
    setup, advice = (textwrap.dedent(b) for b in blocks)
    data = np.random.RandomState(0).rand(4, 3).astype(np.float32)
    namespace = {"tf": tf.compat.v1, "cg": __import__("compat_grads"), "data": data}
    with tf.Graph().as_default():
        with tf.compat.v1.Session() as sess:
            namespace["sess"] = sess
            exec(setup.replace("per_example = [", "sess.run(tf.global_variables_initializer())"
                               "\nper_example = ["), namespace)
            loop = np.concatenate([row[None] for row in namespace["per_example"]])
            exec(advice, namespace)
    assert namespace["per_example"].shape == (4, 3)
    np.testing.assert_allclose(namespace["per_example"], loop, rtol=1e-5, atol=1e-6)


def test_a_jacobian_of_per_example_losses_names_per_example_gradients():
    """TF Privacy's private pfor Jacobian of the per-example losses: CG107 names
    per_example_gradients with the code's own names; another target keeps the Jacobian."""
    text = ("from tensorflow.python.ops.parallel_for import gradients as pfor_gradients\n"
            "def clipped(vector_loss, var_list, y, x):\n"
            "    rows = pfor_gradients.jacobian(vector_loss, var_list)\n"
            "    return rows, pfor_gradients.jacobian(y, x)\n")
    _, losses, other = migrate.scan_text(text)
    assert losses.code == other.code == "CG107"
    assert ("use cg.per_example_gradients(loss_fn, model, x, y, weights=var_list) (the rows "
            "of the Jacobian of vector_loss, one loss per example") in losses.message
    assert "per_example_gradients" not in other.message
    assert other.message.endswith("use cg.stacked_jacobian(y, x)")


_WAVE = ("import tensorflow.compat.v1 as tf\nn, b = 4, 128\n"
         "x = tf.placeholder(tf.float32, [b, 3 * n])\n"
         "f = tf.expand_dims(tf.reduce_sum(tf.norm(tf.reshape(x, [b, n, 3]), axis=-1), 1), -1)\n"
         "df = tf.gradients(f, x)[0]\n"
         "lap = tf.reduce_sum(tf.map_fn(\n"
         "    lambda i: tf.gradients(tf.expand_dims(df[..., i], -1), x)[0][..., i],\n"
         "    tf.range(3 * n), dtype=tf.float32, back_prop=False), 0)\n")


def test_the_laplacian_message_names_the_codes_tensors_and_back_prop():
    """FermiNet's loop: the call to write in its own names, back_prop=False as
    tf.stop_gradient, one gradient graph per dimension (df is taken once), and what --fix
    writes where the shape of f is not proved."""
    (found,) = migrate.scan_text(_WAVE)
    assert found.code == "CG111" and found.edits
    assert found.message.startswith(
        "hand-built Laplacian: one tf.gradients graph per dimension in a tf.map_fn; use "
        "tf.stop_gradient(cg.batch_laplacian(f, x)) (back_prop=False stops the gradients "
        "through the tf.map_fn's result: tf.stop_gradient does that to the call); --fix "
        "writes tf.stop_gradient(cg.batch_divergence(df, x))")
    assert "tf.gradients differentiates the batch sum of f" in found.message
    inline = _WAVE.replace("df[..., i]", "tf.gradients(f, x)[0][..., i]")
    assert "two tf.gradients graphs per dimension" in migrate.scan_text(inline)[0].message
