"""Every matrix item on every TF2 mode (v1 Graph, tf.function, eager), against the oracle
and against each other, and the quick check's items bit for bit against the TF1 graph route
run in its own process.

Each item runs eager, a v1 Graph and tf.function on one route each, by turns
(`matrix.route_plan`: every case, function and strategy meets every route), and the
quick check's items run with XLA too (jit_compile=True); `COMPAT_GRADS_MATRIX=full` runs every
item on every route, `COMPAT_GRADS_MATRIX=cover` (CI's oldest release) each item once and a
route more only where its case, function or strategy meets it first (`matrix.cover_plan`).
The TF1 process runs the tensor
route only: the TF1 suite (tests_tf1/test_matrix.py) holds the TF1 routes to the oracle and
to tf1.tensor bit for bit, so each TF1 route equals the TF2 graph routes bit for bit through
tf1.tensor, and running tf1.callable here again would only repeat that work. It runs the
quick check's items (every case, every function with every strategy and every option at
least once, as `compat-grads check` compares TF1 with TF2), and every item with
`COMPAT_GRADS_MATRIX=full`: the TF1 suite holds every other item's TF1 result to the same
oracle, and a TF1 process over every item took 115 s of this suite's 25 minutes on the
oldest release (CI's 30-minute budget)."""

import collections
import os

import pytest

from compat_grads.testing import TF2_ROUTES, XLA_ROUTES, checks, items, matrix

ITEMS = items()
PLAN_KIND = os.environ.get("COMPAT_GRADS_MATRIX") or "turns"
FULL = PLAN_KIND == "full"
ROUTES = (*TF2_ROUTES, *XLA_ROUTES)
TURNS = matrix.route_plan(ITEMS, ROUTES)
EVERY = matrix.route_plan(ITEMS, ROUTES, full=True)
COVER = matrix.cover_plan(ITEMS, ROUTES)
PLAN = {"full": EVERY, "turns": TURNS, "cover": COVER}[PLAN_KIND]
IN_TF1 = {item.id for item in (ITEMS if FULL else matrix.quick(ITEMS))}


@pytest.fixture(scope="session")
def tf1_results():
    return checks.run_tf1_process([i for i in ITEMS if i.id in IN_TF1], ["tf1.tensor"],
                                  bitwise=True)


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_matrix(item, tf1_results):
    extra = tf1_results.get(item.id, {})
    problems, results, _, _ = checks.check_item(item, PLAN[item.id], "tf1.tensor", extra)
    assert not problems, "\n".join(problems)
    tf1 = {"tf1.tensor"} if item.id in IN_TF1 else set()
    assert set(results) == {*PLAN[item.id], *tf1} & {
        r for r in (*ROUTES, "tf1.tensor") if item.applies(r)}


def test_tf1_process_really_ran_tf1(tf1_results):
    assert set(tf1_results) == IN_TF1
    matmul = tf1_results["matmul_column-stacked_jacobian-auto"]["tf1.tensor"]
    assert matmul.error is None
    assert matmul.values[1].shape == (100, 1, 50, 1)  # after the value (return_value)


def _met(plan, key):
    return {(key(item), route) for item in ITEMS for route in plan[item.id]}


def test_every_item_runs_every_mode_and_each_case_function_and_strategy_every_route():
    full, turns = EVERY, TURNS
    for item in ITEMS:
        modes = {r.split(".")[0] for r in turns[item.id]} - {"xla"}
        assert modes == {"v1_graph", "function", "eager"}
        assert set(turns[item.id]) <= set(full[item.id])
        assert len([r for r in turns[item.id] if not r.startswith("xla.")]) == 3, item.id
    for key in (lambda i: i.case.name, lambda i: i.function, lambda i: i.strategy):
        assert _met(turns, key) == _met(full, key)
    # every mode's routes by turns: well under half of all the runs, spread evenly
    assert sum(map(len, turns.values())) < 0.4 * sum(map(len, full.values()))
    for mode in ("function.", "eager."):
        runs = collections.Counter(r for routes in turns.values() for r in routes
                                   if r.startswith(mode))
        assert max(runs.values()) < 1.5 * min(runs.values()), runs


def test_the_cover_plan_runs_each_item_once_and_each_key_on_every_route():
    # CI's plan for the oldest release (COMPAT_GRADS_MATRIX=cover)
    for item in ITEMS:
        assert COVER[item.id] and set(COVER[item.id]) <= set(EVERY[item.id]), item.id
    for key in (lambda i: i.case.name, lambda i: i.function, lambda i: i.strategy):
        assert _met(COVER, key) == _met(TURNS, key)  # == every route's (the test above)
    assert sum(map(len, COVER.values())) < 0.4 * sum(map(len, TURNS.values()))


def test_chunk_size_meets_every_strategy_of_each_function_by_turns():
    chunked = [i for i in ITEMS if i.chunk_size]
    for function in ("stacked_jacobian", "batch_jacobian", "hessian", "batch_hessian"):
        runs = collections.Counter(i.strategy for i in chunked if i.function == function)
        assert set(runs) == {"reverse", "forward", "loop"}, (function, runs)
        cases = {i.case.name for i in chunked if i.function == function}
        assert cases == {i.case.name for i in ITEMS if i.function == function
                         and i.case.name in matrix.CHUNKED}
        if len(cases) >= 3:  # one strategy chunked per case, each on about a third of them
            assert sum(runs.values()) == len(cases) and max(runs.values()) <= min(
                runs.values()) + 1, (function, runs)


def test_the_plan_is_the_whole_matrixs_whatever_pytest_selects():
    # `pytest -k` runs a subset with the routes the whole matrix gives it
    assert set(PLAN) == {item.id for item in items()}
    assert all(set(EVERY[i.id]) == {r for r in ROUTES if i.applies(r)} for i in ITEMS)


def test_xla_and_the_tf1_process_run_the_quick_checks_items():
    xla = {item.id for item in ITEMS if "xla.callable" in TURNS[item.id]}
    assert xla == {item.id for item in matrix.quick(ITEMS)}
    assert IN_TF1 == ({item.id for item in ITEMS} if FULL else xla)
    # the TF1 process meets every case, function and strategy
    for key in (lambda i: i.case.name, lambda i: i.function, lambda i: (i.function, i.strategy)):
        assert {key(i) for i in ITEMS if i.id in IN_TF1} == {key(i) for i in ITEMS}
    assert any(item.chunk_size for item in ITEMS if item.id in xla)  # chunks XLA compiles
