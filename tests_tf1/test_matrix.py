"""Every matrix item in a TF1 graph (Session), against the oracle and, among the graph
routes, bit for bit against tf1.tensor (which the TF2 suite compares bit for bit with the
TF2 graph routes). Every item runs tf1.tensor and one of tf1.callable and tf1.tape, by turns
(`matrix.route_plan`: every case, function and strategy meets both);
`COMPAT_GRADS_MATRIX=full` runs every item on every TF1 route, `COMPAT_GRADS_MATRIX=cover` (CI's
oldest release) tf1.tensor on each item and another route only where the item's case,
function or strategy meets it first (`matrix.cover_plan`)."""

import os

import pytest

from compat_grads.testing import TF1_ROUTES, checks, items, matrix

ITEMS = items()
PLAN_KIND = os.environ.get("COMPAT_GRADS_MATRIX") or "turns"
PLAN = (matrix.cover_plan(ITEMS, TF1_ROUTES, "tf1.tensor") if PLAN_KIND == "cover" else
        matrix.route_plan(ITEMS, TF1_ROUTES, full=PLAN_KIND == "full"))


def test_this_process_is_tf1():
    import tensorflow as tf

    import compat_grads as cg

    assert not tf.executing_eagerly()
    assert not tf.compat.v1.control_flow_v2_enabled()
    assert cg.execution_mode() == "graph"


@pytest.mark.parametrize("item", ITEMS, ids=str)
def test_matrix(item):
    problems, results, _, _ = checks.check_item(item, PLAN[item.id], "tf1.tensor")
    assert not problems, "\n".join(problems)
    assert set(results) == set(PLAN[item.id])


def test_each_case_function_and_strategy_meets_every_tf1_route():
    full = matrix.route_plan(ITEMS, TF1_ROUTES, full=True)
    turns = matrix.route_plan(ITEMS, TF1_ROUTES)
    for item in ITEMS:  # tf1.tensor, the reference, wherever it applies, and one more
        assert ("tf1.tensor" in turns[item.id]) == item.applies("tf1.tensor")
        assert len(turns[item.id]) == min(2, len(full[item.id]))
    for key in (lambda i: i.case.name, lambda i: i.function, lambda i: i.strategy):
        met = {(key(item), route) for item in ITEMS for route in turns[item.id]}
        assert met == {(key(item), route) for item in ITEMS for route in full[item.id]}


def test_the_cover_plan_runs_tf1_tensor_and_meets_every_tf1_route():
    turns = matrix.route_plan(ITEMS, TF1_ROUTES)
    cover = matrix.cover_plan(ITEMS, TF1_ROUTES, "tf1.tensor")
    for item in ITEMS:
        assert cover[item.id][:1] == (("tf1.tensor",) if item.applies("tf1.tensor")
                                      else turns[item.id][:1]), item.id
    for key in (lambda i: i.case.name, lambda i: i.function, lambda i: i.strategy):
        met = [{(key(i), r) for i in ITEMS for r in plan[i.id]} for plan in (cover, turns)]
        assert met[0] == met[1]
    assert sum(map(len, cover.values())) < 0.7 * sum(map(len, turns.values()))
