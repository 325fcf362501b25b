"""`compat-grads bench --curvature` at tiny sizes: every recipe is timed and agrees where it
computes the same thing (the NTK's recipes against ours), the targets are each goal's ratio,
the peak is read in a process of its own, and the tables print. Timings are never asserted:
the numbers are in docs/curvature.rst, measured with the bench."""

import importlib.util
import json
import math
import pathlib

import numpy as np
import pytest

from compat_grads.bench import curvature

pytestmark = pytest.mark.tooling  # CI runs these on the newest release only


@pytest.fixture(scope="module")
def report():
    models = [curvature.times(name, quick=True, repeats=1) for name in curvature.MODELS]
    found = {"models": models,
             "processes": {m["model"]: [m["ms"], curvature.times(
                 m["model"], quick=True, repeats=1, products_only=True)["ms"]]
                 for m in models},
             "peaks": {recipe: curvature._process(["peak", "mlp670k", recipe, 1],
                                                  curvature.BFC)["peak_mb"]
                       for recipe in ("one gradient", "top_eigenvalues(op, 1)")},
             "ntk": curvature.ntk_times(quick=True, repeats=1),
             "ntk_scale": curvature.ntk_scale(quick=True)}
    found["ntk_scale"]["peak_mb"] = {
        recipe: curvature._process(["ntk_scale", 1, recipe], curvature.BFC)["peak_mb"]
        for recipe in found["ntk_scale"]["recipes"]}
    found["targets"] = curvature.targets(found)
    return found


def test_every_recipe_is_timed(report):
    mlp, cnn = report["models"]
    assert mlp["weights"] == 784 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10
    shared = {"one gradient", "nested tapes (reverse over reverse)",
              "ForwardAccumulator over a tape", "cg.hvp (eager call)",
              "hessian_operator.matvec in tf.function"}
    assert set(mlp["ms"]) == shared
    assert set(cnn["ms"]) == shared | {"top_eigenvalues(op, 5), 30 products",
                                       "trace_estimate(op, num_samples=20)"}
    assert all(ms > 0 and math.isfinite(ms) for m in (mlp, cnn) for ms in m["ms"].values())
    assert all(mb > 0 for mb in report["peaks"].values())


def test_the_hvp_recipes_compute_the_same_product():
    """What the bench times agrees: our two HVPs, nested tapes and the accumulator."""
    products = {name: np.concatenate([np.reshape(p, [-1]) for p in fn()])
                for name, fn in curvature._recipes("cnn", quick=True).items()
                if name not in ("one gradient",) and "(op" not in name}
    reference = products.pop("nested tapes (reverse over reverse)")
    for name, product in products.items():
        np.testing.assert_allclose(product, reference, rtol=1e-4,
                                   atol=1e-5 * np.abs(reference).max(), err_msg=name)


def test_the_ntk_recipes_agree_with_ours(report):
    ntk = report["ntk"]
    assert ntk["x1"] == [4, 32, 32, 3] and ntk["x2"] == [2, 32, 32, 3]
    expected = {"cg.empirical_ntk in tf.function",
                "GradientTape.jacobian of the batch + einsum"}
    if importlib.util.find_spec("jax") is not None:
        expected.add("JAX jit(vmap(jacrev)) + einsum")
    if "neural_tangents" not in ntk["missing"]:
        expected.add("neural-tangents empirical_ntk_fn (jit)")
    assert set(ntk["ms"]) == expected == set(ntk["relative_difference"])
    assert max(ntk["relative_difference"].values()) < 1e-4


def test_the_targets_and_the_tables(report):
    targets = {t["target"]: t for t in report["targets"]}
    assert len(targets) == 8
    # each process's ratio, side by side in it; the median over the processes, the spread
    runs = report["processes"]["cnn"]
    assert set(runs[1]) == set(curvature.PRODUCTS)
    ratios = [ms["hessian_operator.matvec in tf.function"] / ms[curvature.NESTED]
              for ms in runs]
    matvec = targets["hvp / nested tapes (cnn, hessian_operator.matvec in tf.function)"]
    assert matvec["measured"] == pytest.approx(np.median(ratios))
    assert matvec["spread"] == pytest.approx(sorted(ratios))
    assert matvec["met"] == (matvec["measured"] <= 1.0)
    table = curvature.markdown(report)
    assert "| top_eigenvalues(op, 1) |" in table and "| target | measured | goal | met |" in table


def test_the_curvature_page_shows_the_committed_bench_run():
    bench = pathlib.Path(__file__).resolve().parents[1] / "docs" / "_static" / "bench"
    report = json.loads((bench / "curvature.json").read_text())
    assert (bench / "curvature.rst").read_text() == curvature.rst(report)
    assert [m["model"] for m in report["models"]] == list(curvature.MODELS)
    assert not report["quick"] and report["ntk"]["x1"] == list(curvature.NTK_SHAPES["x1"])


@pytest.mark.parametrize("ratio, verdict", [(0.99, "yes"), (1.05, "tie"), (1.06, "no")])
def test_against_nested_tapes_a_ratio_within_the_tie_is_a_tie(ratio, verdict):
    """Nested tapes' time over ours at or above 0.95 is a tie (the same product); against
    one gradient (a goal of 4) there is no tie."""
    ms = {recipe: 1.0 for recipe in curvature.PRODUCTS}
    ms["hessian_operator.matvec in tf.function"] = ms["cg.hvp (eager call)"] = ratio
    report = {"models": [{"model": "m", "ms": ms}], "processes": {"m": [ms, ms, ms]}}
    targets = {t["target"]: t for t in curvature.targets(report)}
    nested = targets["hvp / nested tapes (m, cg.hvp (eager call))"]
    assert curvature._verdict(nested).split(" ")[0] == verdict
    assert curvature._verdict(targets["hvp / one gradient (m, cg.hvp (eager call))"]) == "yes"


def test_the_ntk_at_scale_is_chunked_under_its_budget_and_agrees(report):
    """400 examples under 3 MiB in the test (10,000 under 600 MiB in the bench): in chunks,
    the kernel at once's, the chunked one's peak below the one at once."""
    scale = report["ntk_scale"]
    assert scale["recipes"] == ["at once", "memory_budget=3 MiB"]
    assert scale["pieces"] > 1 and scale["relative_difference"] <= 1e-5
    assert scale["jacobians_mb"] > 3 > scale["peak_mb"]["memory_budget=3 MiB"]
    assert scale["peak_mb"]["memory_budget=3 MiB"] < scale["peak_mb"]["at once"]
    assert "| NTK of 400 x 400 (4,801 weights;" in curvature.markdown(report)

