"""`compat-grads --help`, each command's `--help` and `--version`: written for users (what
it does, examples, exit status), not for the project's developers."""

import subprocess
import sys

import pytest

import compat_grads
from compat_grads import cli

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only


def _exit_and_output(capsys, argv):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    return stopped.value.code, capsys.readouterr().out


def test_version(capsys):
    code, out = _exit_and_output(capsys, ["--version"])
    assert code == 0 and out.strip() == f"compat-grads {compat_grads.__version__}"


def test_help_says_what_the_commands_do_with_examples(capsys):
    code, out = _exit_and_output(capsys, ["--help"])
    assert code == 0
    assert out.startswith("usage: compat-grads [-h] [--version] COMMAND ...")
    assert "module" not in out and "hands them over" not in out
    for command in ("check", "bench", "scan"):
        assert f"\n    {command} " in out
    assert "compat-grads scan --fix train.py" in out
    assert "compat-grads COMMAND --help" in out


@pytest.mark.parametrize("command,statuses", [
    ("check", ["0 every row agrees", "1 a mismatch", "130 after Ctrl-C"]),
    ("scan", ["0 no findings", "1", "3 an internal"]),
    ("bench", ["0 when the bench ran"]),
])
def test_each_command_has_an_example_and_its_exit_status(capsys, monkeypatch, command,
                                                         statuses):
    monkeypatch.setenv("COLUMNS", "80")
    code, out = _exit_and_output(capsys, [command, "--help"])
    assert code == 0
    assert f"examples:\n  compat-grads {command}" in out
    exit_status = out[out.index("exit status:"):]
    assert all(status in " ".join(exit_status.split()) for status in statuses)
    assert max(len(line) for line in out.splitlines()) <= 80  # a terminal's width


def test_python_m_compat_grads_is_the_same_command():
    done = subprocess.run([sys.executable, "-m", "compat_grads", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert done.stdout.strip() == f"compat-grads {compat_grads.__version__}"


def test_the_installed_package_says_who_made_it_and_what_it_is():
    """`pip show compat_grads` shows an author and a summary (a home page once published)."""
    from importlib import metadata

    meta = metadata.metadata("compat_grads")
    assert meta["Author"] == "The compat_grads maintainers"
    assert "TF1 graph mode and TF2 eager mode" in meta["Summary"]
    assert "jacobian" in meta["Keywords"]
