"""Where `compat-grads scan --fix` puts the imports its rewrites need: with the module's other
top-level imports (never after code such as `tf.disable_v2_behavior()`, which flake8 reports
as E402), and before the first statement it rewrites."""

import ast
import re
import subprocess
import sys

import pytest

from compat_grads import migrate

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only

_PROGRAM = '''\
"""A legacy TF1 program: the Hessian of a small function, printed."""
from __future__ import annotations

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
np.random.seed(0)
print("setup done")
x = tf.placeholder(tf.float64, [3])
h = tf.hessians(tf.reduce_sum(tf.sin(x) * x ** 2), x)
with tf.Session() as sess:
    print(np.round(sess.run(h, {x: np.arange(3.0)})[0], 8).tolist())
'''


def _e402(source: str) -> list[str]:
    """The top-level imports that follow code, as pycodestyle's E402 finds them: only a
    docstring, imports, `__dunder__ = ...` and `if` / `try` / `with` statements may come
    before an import."""
    body, seen_code, late = ast.parse(source).body, False, []
    for k, stmt in enumerate(body):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            late += [ast.unparse(stmt)] if seen_code else []
        elif not (isinstance(stmt, ast.If | ast.Try | ast.With) or (
                k == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
                or (isinstance(stmt, ast.Assign) and re.fullmatch(
                    r"__\w+__", getattr(stmt.targets[0], "id", "")))):
            seen_code = True
    return late


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
    ('"""Doc."""\n__all__ = ["h"]\ntry:\n    import tensorflow.compat.v1 as tf\n'
     "except ImportError:\n    raise\n", "tf.disable_v2_behavior()\n"),
], ids=["disable-v2", "block-and-calls", "import-after-code", "dunder-and-try"])
def test_the_import_goes_with_the_imports_never_after_code(head, setup):
    """Before `tf.disable_v2_behavior()` and the like (compat_grads loads no TensorFlow on
    import, so the order does not matter to it), after the last import of the block."""
    text = head + setup + "print('ready')\nx = tf.ones([2])\nh = tf.hessians(x ** 3, x)\n"
    text = text.replace("tf.", "v1.") if "import v1" in head else text
    fixed = migrate.fix_text(text)
    assert fixed.startswith(head + "import compat_grads as cg\n" + setup + "print('ready')\n")
    assert _e402(fixed) == _e402(text)


def test_the_import_comes_before_the_first_rewrite_without_a_top_level_tensorflow_import():
    text = ("try:\n    import tensorflow.compat.v1 as tf\nexcept ImportError:\n    tf = None\n"
            "x = tf.constant([1.0])\nh = tf.hessians(x ** 3, x)\nimport os\n")
    fixed = migrate.fix_text(text.replace("    tf = None\n", "    raise\n"))
    lines = fixed.splitlines()
    assert lines.index("import compat_grads as cg") < lines.index(
        "h = [cg.hessian(tf.reduce_sum(x ** 3), x)]") < lines.index("import os")


@pytest.mark.parametrize("head", [
    '"""Doc."""\n', '"""Doc."""\nfrom __future__ import annotations\n',
], ids=["docstring", "future"])
def test_without_imports_before_code_the_import_follows_the_docstring_and_future(head):
    """The program's own import of TensorFlow after code (E402 already) stays where it is;
    the new import goes above that code."""
    body = ("print('before')\nimport tensorflow.compat.v1 as tf  # noqa: E402\n"
            "h = tf.hessians(tf.ones([2]), tf.ones([2]))\n")
    fixed = migrate.fix_text(head + body)
    assert fixed.startswith(head + "import compat_grads as cg\n" + body[:15])
    assert _e402(fixed) == _e402(head + body) == ["import tensorflow.compat.v1 as tf"]


def test_a_fixed_program_has_no_late_import_and_prints_what_it_printed(tmp_path):
    """A docstring, `from __future__`, imports, `tf.disable_v2_behavior()` and more code:
    the fixed file passes E402 (ruff's too, where it is installed) and runs as before."""
    original = tmp_path / "original.py"
    fixed = tmp_path / "fixed.py"
    original.write_text(_PROGRAM, "utf-8")
    fixed.write_text(migrate.fix_text(_PROGRAM), "utf-8")
    text = fixed.read_text("utf-8")
    assert "cg.hessian(" in text and text.index("import compat_grads as cg") < text.index(
        "tf.disable_v2_behavior()")
    assert _e402(text) == []
    try:
        import ruff  # noqa: F401
    except ImportError:
        pass
    else:
        lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated",
                               "--select", "E402", str(fixed)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout
    runs = [subprocess.run([sys.executable, str(p)], capture_output=True, text=True,
                           timeout=300) for p in (original, fixed)]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and "setup done" in runs[1].stdout
