"""The public signatures as a user's type checker sees them (mypy, configured in
pyproject.toml): through the `public` decorator, every function keeps its signature, a
wrong option is an error, and the typed example passes `mypy --strict`."""

import inspect
import pathlib

import pytest
from mypy import api

import compat_grads as cg

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only

ROOT = pathlib.Path(__file__).resolve().parents[1]
FUNCTIONS = [n for n in cg.__all__ if inspect.isfunction(getattr(cg, n))]


def _mypy(tmp_path, source):
    """(exit status, report) of `mypy --strict` on `source`, from the repository's root."""
    program = tmp_path / "program.py"
    program.write_text(source)
    out, err, status = api.run(["--strict", "--no-incremental", "--config-file",
                                str(ROOT / "pyproject.toml"), str(program)])
    return status, out + err


def test_the_typed_example_passes_strict(monkeypatch):
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(["--strict", "--no-incremental", "examples/typed_usage.py"])
    assert status == 0, out + err


def test_every_public_function_keeps_its_signature(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    status, report = _mypy(tmp_path, "import compat_grads as cg\n" + "".join(
        f"reveal_type(cg.{name})\n" for name in FUNCTIONS))
    revealed = [line.split('Revealed type is "', 1)[1] for line in report.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == len(FUNCTIONS), report
    for name, shown in zip(FUNCTIONS, revealed):
        parameters = list(inspect.signature(getattr(cg, name)).parameters)
        assert shown.startswith("def ("), (name, shown)
        assert all(f"{p}:" in shown for p in parameters if p not in ("args", "kwargs")), (
            name, shown)


def test_a_wrong_strategy_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    status, report = _mypy(tmp_path, (
        "import tensorflow as tf\nimport compat_grads as cg\n\n"
        "x = tf.constant([1.0, 2.0])\n"
        "cg.stacked_jacobian(lambda v: v * v, x, strategy=\"backward\")\n"))
    assert status == 1
    assert 'Argument "strategy" to "stacked_jacobian" has incompatible type' in report
