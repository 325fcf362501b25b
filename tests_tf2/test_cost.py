"""The static rule that decides how rows run for strategy="auto" (compat_grads._src.stacking.cost):
given
sizes and op types it picks vectorized, separate passes or a while_loop; the routes it picks
give the values of the explicit strategies. No timings here: the measurements
behind the thresholds are in docs/performance.rst."""

import numpy as np
import pytest
import tensorflow as tf

import compat_grads as cg
from compat_grads._src.stacking import cost as _cost
from compat_grads._src.stacking.cost import FEW_ROWS, GRADIENT_ROWS, ROW_BYTES, Facts, Plan, plan

SMALL = Facts(4 * 2**10, frozenset({"MatMul", "Tanh"}))


@pytest.mark.parametrize("rows, facts, want", [
    (10, SMALL, Plan(True)),
    (10_000, SMALL, Plan(True)),
    (10, Facts(ROW_BYTES, frozenset({"MatMul"})), Plan(True)),
    (10, Facts(ROW_BYTES + 1, frozenset({"MatMul"})), Plan(False, separate=True)),
    (1071, Facts(ROW_BYTES + 1, frozenset({"MatMul"})), Plan(False)),
    (10, Facts(1024, frozenset({"Conv2D"})), Plan(False, separate=True)),
    (10, Facts(1024, frozenset({"MaxPoolGrad"})), Plan(False, separate=True)),
    (FEW_ROWS + 1, Facts(1024, frozenset({"Conv2DBackpropInput"})), Plan(False)),
    (8, Facts(1024, frozenset({"StatelessWhile", "MatMul"})), Plan(False)),
    (None, Facts(1024, frozenset({"Conv2D"})), Plan(False)),
    (None, SMALL, Plan(True)),
    (10, Facts(None, frozenset()), Plan(True)),
], ids=["few small rows", "many small rows", "rows at the limit",
        "few large rows: separate passes", "many large rows: while_loop",
        "convolution", "pooling gradient", "many rows through a convolution",
        "a TF2 loop (tf.foldl)",
        "unknown count through a convolution", "unknown count, small rows",
        "unknown sizes (eager tensors)"])
def test_the_rule_picks(rows, facts, want):
    assert plan(rows, facts) == want


LOW, HIGH = GRADIENT_ROWS
HESSIAN_KINDS = frozenset({"MatMul", "Tanh", "TanhGrad"})


def _large(largest):
    return Facts(8 * largest, HESSIAN_KINDS, largest)


@pytest.mark.parametrize("rows, facts, through_gradient, want", [
    (8, _large(4 * LOW), True, Plan(True)),
    (8, _large(4 * LOW), False, Plan(False, separate=True)),
    (8, _large(LOW), True, Plan(False, separate=True)),
    (8, _large(LOW + 4), True, Plan(True)),
    (HIGH // (4 * LOW), _large(4 * LOW), True, Plan(True)),
    (HIGH // (4 * LOW) + 1, _large(4 * LOW), True, Plan(False)),
    (8, _large(HIGH // 8 + 4), True, Plan(False, separate=True)),
    (None, _large(4 * LOW), True, Plan(False)),
    (8, Facts(8 * 4 * LOW, frozenset({"Conv2D"}), 4 * LOW), True, Plan(False, separate=True)),
    (8, Facts(ROW_BYTES + 1, HESSIAN_KINDS, None), True, Plan(False, separate=True)),
    (8, Facts(ROW_BYTES, HESSIAN_KINDS, ROW_BYTES), True, Plan(True)),
], ids=["mid-sized rows through a gradient: vectorized", "the same rows, first order",
        "rows' tensors at the lower limit", "rows' tensors just above it",
        "all rows at the upper limit", "one row more", "all rows above the upper limit",
        "unknown count", "through a convolution", "largest tensor unknown",
        "small rows through a gradient"])
def test_the_rule_for_rows_through_a_gradient(rows, facts, through_gradient, want):
    """Few large rows pushing tangents through a gradient stay vectorized in a window of
    tensor sizes (GRADIENT_ROWS); elsewhere the first-order rule holds."""
    assert plan(rows, facts, through_gradient=through_gradient) == want


def _cnn(x):
    kernel = tf.constant(np.random.RandomState(0).randn(3, 3, 1, 4).astype(np.float32))
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")), 2, 2, "VALID")
    return tf.reduce_sum(tf.reshape(h, [-1, 4 * 4, 4]), axis=1)  # (b, 4) "classes"


def test_facts_of_a_graph_count_its_float_tensors_and_name_its_ops():
    seen = {}

    @tf.function
    def trace(x):
        y = tf.tanh(x @ tf.ones([3, 5]))
        seen["facts"] = _cost.graph_facts([y], [x])
        return y

    trace.get_concrete_function(tf.TensorSpec([2, 3]))
    assert {"MatMul", "Tanh"} <= seen["facts"].kinds and "Const" not in seen["facts"].kinds
    assert seen["facts"].row_bytes == 2 * (2 * 5 * 4)  # the product and its tanh
    assert seen["facts"].largest == 2 * 5 * 4


def test_an_unknown_dimension_counts_as_a_typical_batch():
    seen = {}

    @tf.function
    def trace(x):
        seen["facts"] = _cost.graph_facts([tf.sin(x)], [x])
        return x

    trace.get_concrete_function(tf.TensorSpec([None, 3]))
    assert seen["facts"].row_bytes == _cost.UNKNOWN_DIM * 3 * 4


def test_eager_tensors_have_unknown_facts():
    x = tf.constant([1.0, 2.0])
    assert _cost.graph_facts([tf.sin(x)], [x]) == Facts(None, frozenset())


def _loop_and_pfor_ops(fn, *specs):
    graph = tf.function(fn).get_concrete_function(*specs).graph
    types = {op.type for op in graph.get_operations()}
    pfor = any("pfor" in op.name for op in graph.get_operations())
    return types, pfor


def test_auto_runs_few_rows_through_a_convolution_as_separate_passes():
    types, pfor = _loop_and_pfor_ops(
        lambda x: cg.stacked_jacobian(lambda v: tf.reduce_sum(_cnn(v), 0), x),
        tf.TensorSpec([8, 8, 8, 1]))
    assert not pfor and not types & {"While", "StatelessWhile"}
    assert "Conv2DBackpropInput" in types


def test_auto_keeps_large_rows_in_a_while_loop_and_reverse_does_not():
    """A Hessian through a wide batch: rows over ROW_BYTES run in a while_loop for "auto";
    "reverse" keeps its meaning (vectorized), with the same values."""
    data = tf.constant(np.random.RandomState(1).randn(512, 6).astype(np.float32))

    def loss(theta):
        return tf.reduce_mean(tf.tanh(data @ tf.reshape(theta, [6, 64])) ** 2)

    spec = tf.TensorSpec([6 * 64])
    auto_types, auto_pfor = _loop_and_pfor_ops(lambda v: cg.hessian(loss, v), spec)
    _, reverse_pfor = _loop_and_pfor_ops(lambda v: cg.hessian(loss, v, strategy="reverse"),
                                         spec)
    assert auto_types & {"While", "StatelessWhile"} and not auto_pfor and reverse_pfor
    theta = tf.constant(np.linspace(-1, 1, 6 * 64).astype(np.float32))
    np.testing.assert_allclose(cg.hessian(loss, theta).numpy(),
                               cg.hessian(loss, theta, strategy="reverse").numpy(),
                               rtol=1e-4, atol=1e-6)


def test_separate_passes_equal_the_vectorized_rows():
    x = tf.constant(np.random.RandomState(3).randn(2, 8, 8, 1).astype(np.float32))
    f = lambda v: tf.reduce_sum(_cnn(v), 0)  # noqa: E731
    np.testing.assert_allclose(cg.stacked_jacobian(f, x).numpy(),
                               cg.stacked_jacobian(f, x, strategy="reverse").numpy(),
                               rtol=1e-5, atol=1e-6)


def test_rows_through_a_tf2_loop_run_in_a_while_loop_not_pfor():
    """A second-order batch_jacobian through tf.foldl: pfor would trace the loop's bodies
    again (seconds); the rule keeps one while_loop, with the values of strategy='loop'."""
    weights = tf.constant(np.random.RandomState(4).randn(2, 3, 3).astype(np.float32) / 2)

    def f(v):
        return tf.reduce_sum(tf.foldl(lambda h, w: tf.tanh(h @ w), weights, initializer=v), 1)

    x = tf.constant(np.random.RandomState(5).randn(4, 3).astype(np.float32))
    graph = tf.function(lambda v: cg.batch_hessian(f, v)).get_concrete_function(
        tf.TensorSpec([4, 3])).graph
    assert not any("pfor" in op.name for op in graph.get_operations())
    np.testing.assert_allclose(cg.batch_hessian(f, x).numpy(),
                               cg.batch_hessian(f, x, strategy="loop").numpy(),
                               rtol=1e-5, atol=1e-6)


def test_a_loop_inside_a_called_function_counts_as_a_loop():
    """A Keras LSTM runs its tf.while_loop in a function of its own: the graph shows only
    the op that calls it. The rule looks inside, and a batch_jacobian through it runs in a
    while_loop (no pfor), with the values of the vectorized rows."""
    weights = tf.constant(np.random.RandomState(6).randn(3, 3).astype(np.float32) / 2)
    recurrent = tf.function(lambda h: tf.while_loop(
        lambda k, h: k < 3, lambda k, h: (k + 1, tf.tanh(h @ weights)), (0, h))[1])
    x = tf.constant(np.random.RandomState(7).randn(4, 3).astype(np.float32))
    graph = tf.function(lambda v: cg.batch_jacobian(recurrent, v)).get_concrete_function(
        tf.TensorSpec([4, 3])).graph
    calls = [op for op in graph.get_operations() if op.type.endswith("PartitionedCall")]
    assert calls and not any("pfor" in op.name for op in graph.get_operations())
    assert _cost.ops_facts(calls).kinds & _cost.LOOP_OPS
    np.testing.assert_allclose(cg.batch_jacobian(recurrent, x).numpy(),
                               cg.batch_jacobian(recurrent, x, strategy="reverse").numpy(),
                               rtol=1e-5, atol=1e-6)


def _mlp_per_sample_hessian(batch):
    """batch_hessian of a tanh MLP (8 -> 64 -> 64 -> 1) traced for `batch` samples: whether
    its graph vectorizes the 8 rows (pfor), holds a while_loop, and its values for an input
    against strategy='loop'."""
    rng = np.random.RandomState(8)
    w1, w2 = (tf.constant(rng.randn(*s).astype(np.float32) / 4) for s in [(8, 64), (64, 64)])
    w3 = tf.constant(rng.randn(64, 1).astype(np.float32) / 8)

    def f(x):
        return tf.squeeze(tf.tanh(tf.tanh(x @ w1) @ w2) @ w3, axis=1)

    graph = tf.function(lambda v: cg.batch_hessian(f, v)).get_concrete_function(
        tf.TensorSpec([batch, 8])).graph
    types = {op.type for op in graph.get_operations()}
    x = tf.constant(rng.randn(batch, 8).astype(np.float32))
    np.testing.assert_allclose(cg.batch_hessian(f, x).numpy(),
                               cg.batch_hessian(f, x, strategy="loop").numpy(),
                               rtol=1e-4, atol=1e-6)
    return any("pfor" in op.name for op in graph.get_operations()), types


@pytest.mark.parametrize("batch, vectorized", [(1024, True), (256, False), (4096, False)])
def test_per_sample_hessian_rows_vectorize_in_the_window(batch, vectorized):
    """b=1024: the rows' tensors are 256 KiB, 2 MiB together (in GRADIENT_ROWS), so the 8
    forward-over-reverse rows run vectorized; b=256 (64 KiB) and b=4096 (8 MiB together)
    run as separate passes. Each with the values of strategy='loop'."""
    pfor, types = _mlp_per_sample_hessian(batch)
    assert pfor == vectorized
    assert not types & {"While", "StatelessWhile"}


def test_the_window_bench_times_each_plan_checked_against_nested_tapes():
    """`python -m compat_grads.bench.second_order_rows`, one tiny size in this process:
    every recipe timed (its values checked against nested tapes inside), the rule's plan and
    the first-order rule's read from the graphs."""
    from compat_grads.bench import second_order_rows as sor

    row = sor.one(64, 4, 8, "fresh", 2)
    assert set(row["ms"]) == {sor.RULE, sor.ONE_BY_ONE, sor.VECTORIZED, sor.NESTED}
    assert all(ms > 0 for ms in row["ms"].values())
    assert row["plan"] == "vectorized" and row["one_by_one"] == "vectorized"  # small rows
    assert row["largest_kib"] == 64 * 8 * 4 / 1024 and row["together_mib"] == 4 * 2 / 1024
    with sor._first_order_rule():
        assert not _cost._mid_sized(8, 4 * LOW)
    assert _cost._mid_sized(8, 4 * LOW)  # the window is back
