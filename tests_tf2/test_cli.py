"""`compat-grads check`: table, JSON, exit codes, the mode spellings and the docs' counts."""

import json
import pathlib
import re

from compat_grads import cli, pytest_plugin
from compat_grads.testing import matrix, models, modes, oracle, routes

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def test_check_json_all_agree(capsys):
    assert cli.main(["check", "-k", "scalar_stack", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {row["function"] for row in report["rows"]} == {
        "stacked_jacobian", "stacked_jacobian (flat)", "per_element_gradients", "hessian",
        "hessian (flat)", "jvp", "vjp"}
    assert all(row["verdict"] == "ok" for row in report["rows"])
    item = next(i for i in report["items"] if i["id"] == "scalar_stack-stacked_jacobian-loop")
    assert item["routes"][0] == "tf1.tensor" and len(item["routes"]) == 2  # and one TF2 route
    assert {(i["function"], r.split(".")[0]) for i in report["items"] for r in i["routes"]} == {
        (i["function"], mode) for i in report["items"] for mode in modes.MODES}
    assert item["shapes"] == ["(2,)"]
    assert item["oracle_error"] < 1e-6
    assert len(report["tensorflow_distributions"]) == 1


def test_check_exits_1_on_a_mismatch(capsys, monkeypatch):
    real = oracle.expected

    def wrong(*args):
        return [None if v is None else v + 1.0 for v in real(*args)]

    monkeypatch.setattr(oracle, "expected", wrong)
    assert cli.main(["check", "-k", "scalar_stack-per_element"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out
    assert "error vs oracle" in out


def test_check_unknown_pattern_exits_2(capsys):
    assert cli.main(["check", "-k", "no-such-case"]) == 2
    err = capsys.readouterr().err
    assert "no matrix item matches" in err
    assert "warning" not in err


def test_check_warns_of_two_tensorflows(capsys, monkeypatch):
    from compat_grads._src.core import tf as _tf

    two = ["tensorflow 2.21.0", "tensorflow_cpu 2.21.0"]
    monkeypatch.setattr(_tf, "tensorflow_distributions", lambda: two)
    assert cli.main(["check", "-k", "no-such-case"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("compat-grads check: warning: 2 TensorFlow distributions are "
                          "installed in this environment (tensorflow 2.21.0, tensorflow_cpu "
                          "2.21.0)"), err
    assert "pip uninstall -y tensorflow tensorflow_cpu" in err


def test_check_models_runs_the_keras_matrix(capsys):
    assert cli.main(["check", "--models", "-k", "mlp-per_example_gradients", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (row,) = report["rows"]
    assert (row["case"], row["function"], row["verdict"]) == ("mlp", "per_example_gradients",
                                                              "ok")
    assert row["shapes"] == ["(4, 5, 6), (4, 6), (4, 6, 3), (4, 3)"]
    assert {r for item in report["items"] for r in item["routes"]} == {
        "tf1", "v1_graph", "function", "eager", "eager.uncompiled"}
    assert cli.main(["check", "--models", "-k", "no-such-model"]) == 2


def test_every_route_and_plugin_mode_is_spelled_by_the_modes_table():
    assert pytest_plugin.MODES is modes.MODES
    for route in (*routes.TF1_ROUTES, *routes.TF2_ROUTES):
        assert route.split(".")[0] in modes.MODES, route
    assert {route.split(".")[0] for route in models.ROUTES} == set(modes.MODES)
    assert "v1_graph.tensor" in routes.TF2_ROUTES


def test_the_old_v1graph_spelling_still_matches():
    assert modes.canonical("v1graph.tensor") == "v1_graph.tensor"
    everything = matrix.items()
    for old, new in (("v1graph", "v1_graph"), ("*v1graph*", "*v1_graph*")):
        assert matrix.select(everything, old) == matrix.select(everything, new)
    assert cli.main(["check", "-k", "v1graph", "--quiet"]) == 2  # no item id names a mode


def test_check_docs_quote_no_count_that_grows_with_the_matrix():
    for page in ("check.rst", "port.rst"):
        text = (DOCS / page).read_text()
        assert not re.search(r"\b\d+ (quick |matrix |model )?items\b", text), page
        assert not re.search(r"\b\d+ of \d+ rows agree", text), page
