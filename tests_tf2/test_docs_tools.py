"""The docs' own tools: the committed inventories that link TensorFlow's and NumPy's API
pages without network, the extension that shows TensorFlow's types by public name, and the
Performance page's tables."""

import importlib.util
import json
import pathlib
import runpy
import sys
import zlib

from compat_grads._src.core.tf import tf

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_links = _load("api_links", DOCS / "_ext" / "api_links.py")
make_performance = _load("make_performance", DOCS / "make_performance.py")


def _inventory(path):
    """{name: (role, uri)} of an objects.inv (version 2)."""
    data = path.read_bytes()
    header = data.split(b"\n", 4)
    assert header[0] == b"# Sphinx inventory version 2"
    entries = {}
    for line in zlib.decompress(header[4]).decode().splitlines():
        name, role, _priority, uri, _display = line.split(" ", 4)
        entries[name] = (role, uri)
    return entries


def _urls(project):
    """{name: full URL} of a project's inventory, as conf.py tells intersphinx to read it."""
    conf = runpy.run_path(str(DOCS / "conf.py"))
    base, inventory = conf["intersphinx_mapping"][project]
    assert "://" not in inventory  # a local file: the build needs no network
    return {name: base + uri for name, (_, uri) in _inventory(DOCS / inventory).items()}


def test_tensorflow_names_lead_to_tensorflow_org():
    urls = _urls("tensorflow")
    api = "https://www.tensorflow.org/api_docs/python/"
    assert urls["tf.GradientTape"] == api + "tf/GradientTape"
    assert urls["tf.math.reduce_sum"] == api + "tf/math/reduce_sum"
    assert urls["tf.reduce_sum"] == api + "tf/math/reduce_sum"  # the page is the canonical name's
    assert urls["tf.UnconnectedGradients"] == api + "tf/UnconnectedGradients"
    assert urls["tf.function"] == api + "tf/function"
    assert urls["tf.compat.v1.gradients"] == api + "tf/compat/v1/gradients"
    assert not any(name.startswith(("tf.compat.v2.", "tf.compat.v1.compat.", "tf.raw_ops."))
                   for name in urls)


def test_numpy_names_lead_to_numpy_org():
    urls = _urls("numpy")
    page = "https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html"
    assert urls["numpy.ndarray"] == urls["np.ndarray"] == page
    assert urls["numpy.linalg.norm"].endswith("/reference/generated/numpy.linalg.norm.html")


def test_conf_uses_the_theme_and_code_for_single_backticks():
    conf = runpy.run_path(str(DOCS / "conf.py"))
    assert conf["html_theme"] == "furo"
    assert conf["default_role"] == "py:obj"
    assert {"sphinx_copybutton", "sphinx.ext.intersphinx", "api_links"} <= set(
        conf["extensions"])


def test_tensorflow_types_get_their_public_names():
    tape = f"{tf.GradientTape.__module__}.{tf.GradientTape.__qualname__}"
    assert tape.startswith("tensorflow.python.")
    assert api_links.public_name(tape) == "tf.GradientTape"
    enum = tf.UnconnectedGradients
    assert api_links.public_name(f"~{enum.__module__}.{enum.__qualname__}") == (
        "tf.UnconnectedGradients")
    assert api_links.public_name("numpy.ndarray") is None
    assert api_links.public_name("tensorflow.python.no_such_module.X") is None


def _meta(quick):
    """A bench run's `run.json`, as `docs/make_performance.py` writes it."""
    tail = " --quick" if quick else ""
    return {"date": "2026-01-02", "minutes": 3.5, "machine": "CPU, 2 cores, Linux",
            "load": 1.0, "python": "3.11.7", "tensorflow": "2.21.0", "jax": None,
            "numpy": "2.4.6", "command": "python docs/make_performance.py" + tail,
            "bench": "compat-grads bench --out <temporary folder>" + tail}


def test_performance_page_tables():
    from compat_grads.bench import suite

    measures = [  # two eager recipes of ours: the first is the reference, as in the bench
        {"workload": "tall 4x2", "recipe": "compat_grads stacked_jacobian, eager", "ms": 2.0,
         "ours": True},
        {"workload": "tall 4x2", "recipe": "compat_grads stacked_jacobian, eager, jit",
         "ms": 1.0, "ours": True},
        {"workload": "tall 4x2", "recipe": "tape.jacobian, eager", "ms": 50.0, "ours": False}]
    report = {"measures": measures, "quick": True, "targets": [], "memory": [],
              "tf1_graph": [{"m": 20, "recipe": "map_fn over indices + tf.gradients",
                             "build_s": 0.1, "ops": 97, "run_ms": 0.5}]}
    expected = suite._ratios(measures)["tall 4x2"]
    assert {recipe: ratio for (_, recipe), ratio in
            make_performance._ratios(measures).items()} == expected
    meta = _meta(quick=True)
    page = make_performance.page(report, meta)
    assert "   * - tape.jacobian, eager\n     - 50.00\n     - 25.00\n" in page
    assert "   * - 20\n     - map\\_fn over indices + tf.gradients\n" in page  # escaped
    assert "Date: 2026-01-02" in page and "TensorFlow 2.21.0, no JAX" in page
    assert "$ python docs/make_performance.py --quick" in page
    assert ".. image:: _static/bench/tf1_graph.png" in page


def test_performance_page_states_the_vectorizing_rule_and_its_measurements():
    from compat_grads._src.stacking import cost as _cost

    report = {"measures": [], "quick": True, "targets": [], "memory": [], "tf1_graph": [],
              "tf1_cnn": [{"batch": 4, "recipe": "compat_grads gradient_rows", "build_s": 0.2,
                           "run_ms": 9.0, "ratio": 0.98}]}
    meta = _meta(quick=True)
    routes = [{"workload": "MLP Hessian (1,079 rows, b=375)", "recipe": "compat_grads (auto)",
               "ms": 700.0, "ratio": 0.97, "row_kib": 529.0, "plan": "while_loop"}]
    page = make_performance.page(report, meta, routes)
    assert ".. _vectorize-rule:\n\nWhen compat_grads vectorizes\n" in page
    assert f"more than {_cost.ROW_BYTES // 1024} KiB" in page
    assert "   * - MLP Hessian (1,079 rows, b=375)\n     - compat\\_grads (auto)\n" in page
    assert "$ python -m compat_grads.bench.routes" in page
    assert "     - 0.98\n" in page and "few rows through a CNN" in page
    assert "The measurements behind" not in make_performance.page(report, meta)


def test_performance_page_states_the_window_for_rows_through_a_gradient():
    """The window's thresholds come from compat_grads._src.stacking.cost; its table (from
    `python -m compat_grads.bench.second_order_rows`) gives nested tapes' time over each
    plan's, per size and state; without a run, the paragraph and no table."""
    from compat_grads._src.stacking import cost as _cost
    from compat_grads.bench import second_order_rows as sor

    report = {"measures": [], "quick": True, "targets": [], "memory": [], "tf1_graph": []}
    meta = _meta(quick=False)
    rows = [{"batch": 1024, "features": 8, "hidden": 64, "state": state, "largest_kib": 256.0,
             "together_mib": 2.0, "plan": "vectorized", "one_by_one": "separate passes",
             "ms": {sor.RULE: rule, sor.ONE_BY_ONE: 4.0, sor.VECTORIZED: rule, sor.NESTED: 3.0}}
            for state, rule in (("fresh", 2.5), ("used", 2.0))]
    low, high = _cost.GRADIENT_ROWS
    page = make_performance.page(report, meta, None, None, rows)
    assert f"more than {low // 2**10} KiB" in page and f"at most {high // 2**20} MiB" in page
    assert ("   * - 1024, 8, 64\n     - 256\n     - 2.00\n     - vectorized\n"
            "     - 1.20\n     - 0.75\n     - 1.50\n     - 0.75\n") in page
    assert "$ python -m compat_grads.bench.second_order_rows" in page
    bare = make_performance.page(report, meta)
    assert f"at most {high // 2**20} MiB" in bare and "second_order_rows" not in bare


def test_performance_page_renders_the_traces_section_from_its_json():
    """The Laplacians and divergences section, from the committed run of `compat-grads bench
    --traces` (docs/_static/bench/traces.json), and no section without one."""
    traces = json.loads((DOCS / "_static" / "bench" / "traces.json").read_text("utf-8"))
    report = {"measures": [], "quick": True, "targets": [], "memory": [], "tf1_graph": []}
    meta = _meta(quick=False)
    page = make_performance.page(report, meta, None, traces)
    assert ".. _traces-bench:\n\nLaplacians and divergences\n" in page
    assert "$ python docs/make_performance.py --traces" in page
    for row in traces["measures"] + traces["tf1_graph"]:
        assert f"     - {make_performance._text(row['recipe'])}\n" in page
    from compat_grads.bench.traces_process import FEW
    assert f"   * - 512, 200\n     - batch\\_laplacian, chunk\\_size={FEW}\n" in page
    assert "   * - batch\\_laplacian vs batch\\_hessian + trace (d=100)\n" in page
    assert "_traces-bench" not in make_performance.page(report, meta)


def test_performance_page_sets_tensorflows_recipe_with_xla_against_ours_with_xla():
    """The side-by-side table's last column holds TensorFlow's per-example recipe with XLA
    against ours with jit_compile=True; the note gives it against ours with the defaults per
    workload and the times of the workload where it is slowest against ours."""
    from compat_grads.bench import workloads as wl

    workload = "per-example gradients, CNN depthwise (b=4)"
    ms = {f"{wl.OURS} per_example_gradients, eager": 4.0,
          wl.XLA.format("per_example_gradients"): 2.0, wl.VECTORIZED: 8.0,
          wl.TF_XLA.format("vectorized_map(GradientTape)"): 600.0}
    report = {"measures": [{"workload": workload, "recipe": k, "ms": v,
                            "ours": k.startswith(wl.OURS)} for k, v in ms.items()],
              "quick": True, "targets": [], "memory": [], "tf1_graph": []}
    meta = _meta(quick=False)
    page = make_performance.page(report, meta)
    assert "     - vs TF's best with XLA, ours with jit\\_compile=True\n" in page
    assert (f"   * - {workload}\n     - 2.00\n     - n/a\n     - n/a\n     - 300.00 (1)\n"
            in page)
    assert "ours), per-example gradients of each model: CNN depthwise (b=4) 150.00." in page
    assert "depthwise (b=4), 600.0 ms against 2.00 ms" in page


def test_performance_page_sets_the_per_example_workloads_with_onednn_beside_the_defaults():
    """The rows measured with oneDNN's kernels get a note: TensorFlow's recipe against ours
    there per workload, and the plain CNN's times with the kernels and without."""
    from compat_grads.bench import workloads as wl

    ours = f"{wl.OURS} per_example_gradients, eager"
    plain, mlp = "per-example gradients, CNN (b=4)", "per-example gradients, MLP (b=4)"
    ms = {(plain, ours): 4.0, (plain, wl.VECTORIZED): 8.0,
          (plain + wl.ONEDNN, ours): 2.0, (plain + wl.ONEDNN, wl.VECTORIZED): 30.0,
          (mlp + wl.ONEDNN, ours): 1.0, (mlp + wl.ONEDNN, wl.VECTORIZED): 1.5}
    report = {"measures": [{"workload": w, "recipe": r, "ms": v, "ours": r == ours}
                           for (w, r), v in ms.items()],
              "quick": True, "targets": [], "memory": [], "tf1_graph": []}
    page = make_performance.page(report, _meta(quick=False))
    assert "- **With oneDNN's kernels.**" in page
    assert "time / ours): CNN (b=4) 15.00; MLP (b=4) 1.50." in page
    assert "for the plain CNN 30.0 ms with oneDNN against 8.0 ms without,\n" in page
    assert "  ours 2.00 against 4.00." in page
    del report["measures"][2:]  # no workload with oneDNN: no note
    assert "With oneDNN" not in make_performance.page(report, _meta(quick=False))


def test_the_side_by_side_table_leaves_out_empty_rows_and_explains_each_extreme_ratio():
    """A workload with no recipe to set beside ours (the per-call overheads) has no row of
    n/a; a ratio of 10 or more is numbered and explained under the table, and the
    committed bench run has no extreme ratio without an explanation."""
    import json

    from compat_grads.bench import workloads as wl

    measures = [{"workload": "per-call overhead: jvp", "recipe": f"{wl.OURS} jvp, eager",
                 "ms": 0.1, "ours": True},
                {"workload": "J·1 (4x2)", "recipe": f"{wl.OURS} per_element_gradients, eager",
                 "ms": 1.0, "ours": True},
                {"workload": "J·1 (4x2)", "recipe": "tape.jacobian then reduce_sum in "
                 "tf.function", "ms": 40.0, "ours": False}]
    rows, notes = make_performance._side_by_side_rows({"measures": measures})
    assert [row[0] for row in rows] == ["J·1 (4x2)"]
    assert rows[0][1] == "40.00 (1)"
    assert notes[2].startswith("1. J·1 (4x2), 40.00: TensorFlow's best in tf.function builds")
    committed = json.loads((make_performance.OUT / "bench.json").read_text("utf-8"))
    rows, notes = make_performance._side_by_side_rows(committed)
    assert not [row for row in rows if all(cell == "n/a" for cell in row[1:])]
    assert len(notes) - 3 == sum("(" in cell for row in rows for cell in row[1:])
    assert not [note for note in notes if make_performance.UNKNOWN in note]


def test_performance_page_says_which_kernels_ran_and_how_goals_are_judged():
    """The oneDNN note names the kernels of the other rows and TensorFlow's pick on the
    machine, from the report; the targets get the verdict paragraph and their spreads."""
    from compat_grads.bench import verdict
    from compat_grads.bench import workloads as wl

    ours = f"{wl.OURS} per_example_gradients, eager"
    plain = "per-example gradients, CNN (b=4)"
    report = {"measures": [{"workload": w, "recipe": r, "ms": v, "ours": r == ours}
                           for w, r, v in ((plain, ours, 4.0), (plain, wl.VECTORIZED, 8.0),
                                           (plain + wl.ONEDNN, ours, 2.0),
                                           (plain + wl.ONEDNN, wl.VECTORIZED, 3.0))],
              "quick": True, "memory": [], "tf1_graph": [],
              "kernels": {"here": False, "tensorflow_default": True},
              "verdict": {"processes": 5, "runs": {}},
              "targets": [{"target": "never slower (MLP)", "measured": 0.96, "goal": 1.0,
                           "met": False, "tie": True, "spread": [0.9, 1.02], "processes": 5}]}
    page = make_performance.page(report, _meta(quick=False))
    assert ("(The other rows run with Eigen's (``TF_ENABLE_ONEDNN_OPTS=0``, as tox) kernels; on "
            "this machine TensorFlow picks oneDNN.)") in " ".join(page.split())
    assert "judged on the median of 5 fresh processes per workload" in " ".join(page.split())
    assert f"a median at or above {verdict.TIE} is a tie" in " ".join(page.split())
    assert ("   * - never slower (MLP)\n     - 0.96 (0.90-1.02, 5 processes)\n     - 1.00\n"
            "     - tie (the same graph)\n") in page
    del report["verdict"], report["kernels"]
    page = make_performance.page(report, _meta(quick=False))
    assert "fresh processes" not in page and "with the environment's setting" in page


def test_performance_page_states_when_xla_pays_from_its_json():
    report = {"measures": [], "quick": True, "targets": [], "memory": [], "tf1_graph": []}
    xla = {"quick": False, "cases": [
        {"case": "batch_jacobian: MLP b=128", "first_ms": {"default": 100.0, "xla": 400.0},
         "ms": {"default": 0.6, "xla": 0.3}, "breakeven": 1000.0},
        {"case": "stacked_jacobian: wide 100x5000", "first_ms": {"default": 90.0, "xla": 300.0},
         "ms": {"default": 0.5, "xla": 0.6}, "breakeven": None}]}
    page = make_performance.page(report, _meta(quick=False), xla=xla)
    assert ".. _xla-choice:\n\nWhen jit_compile=True pays\n" in page
    assert ("   * - batch\\_jacobian: MLP b=128\n     - 100 / 400\n     - 0.60 / 0.30\n"
            "     - 2.00\n     - 1000\n") in page
    assert "     - never\n" in page
    flat = " ".join(page.split())
    assert ("XLA was faster per call on 1 of 2 cases (2.00x to 2.00x) and repaid its first "
            "call after 1000 to 1000 calls; it was not faster on stacked_jacobian: wide "
            "100x5000.") in page
    assert "gained most on batch\\_jacobian: MLP b=128 (2.00x) and least on" in flat
    assert "longest extra first call here was batch\\_jacobian: MLP b=128's, 300 ms" in flat
    assert "with the environment kernels" in flat
    xla["onednn"] = [False]
    assert "with Eigen's kernels, as the tables" in " ".join(make_performance.page(
        report, _meta(quick=False), xla=xla).split())
    assert "$ python -m compat_grads.bench.xla_choice --json" in page
    assert "_xla-choice" not in make_performance.page(report, _meta(quick=False))


def test_performance_page_states_our_own_cost_per_call_from_the_judged_targets():
    from compat_grads.bench import per_call
    from compat_grads.bench import workloads as wl

    workload, ours = "per-call overhead: jvp", f"{wl.OURS} jvp, eager"
    runs = [{ours: 0.20, per_call.CONCRETE: 0.10}, {ours: 0.25, per_call.CONCRETE: 0.18}]
    report = {"measures": [{"workload": workload, "recipe": r, "ms": v, "ours": r == ours}
                           for r, v in runs[0].items()],
              "quick": True, "memory": [], "tf1_graph": [],
              "verdict": {"processes": 2, "runs": {workload: runs}},
              "targets": [{"target": f"compat_grads' own µs per call over its concrete "
                                     f"function ({workload})", "measured": 85.0, "goal": 20,
                           "met": False, "spread": [70.0, 100.0], "processes": 2}]}
    page = " ".join(make_performance.page(report, _meta(quick=True)).split())
    assert "TensorFlow's own dispatch: 100-180 µs here), in µs, the median of 2 fresh" in page
    assert "``jvp`` 85 (70-100)." in page
    assert "the floor of one function alone moved by up to 80 µs between processes" in page
    assert "Our own Python alone" not in page  # no stub rows in this report
    report["targets"].append({
        "target": f"compat_grads' own Python µs per call, TensorFlow's call a stub ({workload})",
        "measured": 4.4, "goal": 20, "met": True, "spread": [3.5, 6.4], "processes": 2})
    page = " ".join(make_performance.page(report, _meta(quick=True)).split())
    assert "a stub in both (its result returned at once), in µs: ``jvp`` 4 (4-6)." in page
    report["targets"][0]["spread"] = [-0.2, 100.0]  # a process where ours was the faster
    page = " ".join(make_performance.page(report, _meta(quick=True)).split())
    assert "``jvp`` 85 (0-100)." in page
    report["targets"][0]["spread"] = [-5.4, 100.0]
    page = " ".join(make_performance.page(report, _meta(quick=True)).split())
    assert "``jvp`` 85 (-5 to 100)." in page
    report["targets"] = []
    assert "Small calls" not in make_performance.page(report, _meta(quick=True))


def test_performance_page_explains_j1_against_jax_from_its_rows():
    """The J·1 note's numbers come from the workload's rows (JAX's, ours, the primal alone,
    and J·1 by hand reading A twice and once), its claims follow them, and it is left out
    when a row is missing."""
    from compat_grads.bench import workloads as wl

    (two, _), (once, _) = wl.J1_BY_HAND
    ms = {f"{wl.OURS} per_element_gradients, eager": 0.45, wl.PRIMAL: 0.48,
          "jax.jit(jvp)": 0.30, two: 0.60, once: 1.20,
          wl.XLA.format("per_element_gradients"): 0.375}
    report = {"measures": [{"workload": "J·1 (4000x500)", "recipe": r, "ms": v}
                           for r, v in ms.items()]}
    note = " ".join(" ".join(make_performance._j1_note(report)).split())
    assert "JAX's compiled J·1 took 0.300 ms, ours 0.450 ms (0.67 of JAX's speed; with" in note
    assert "``jit_compile=True`` 0.375 ms, 0.80)" in note
    assert "alone in ``tf.function`` 0.480 ms" in note
    assert note.startswith("- **J·1: TensorFlow's floor.** The J·1 (4000x500) of")
    assert "already cost 1.6x JAX's two products, so no J·1" in note
    assert "Reading A once does not help" in note and "1.200 ms against 0.600 ms" in note
    ms[wl.PRIMAL], ms[once] = 0.24, 0.5
    report["measures"] = [{"workload": "J·1 (4000x500)", "recipe": r, "ms": v}
                          for r, v in ms.items()]
    note = " ".join(" ".join(make_performance._j1_note(report)).split())
    assert "cost 0.80x JAX's two products" in note and "no J·1" not in note
    assert "Reading A once helps" in note
    report["measures"] = report["measures"][:2]
    assert make_performance._j1_note(report) == []
