"""chunk_size="auto" (the default) and memory_budget=: the chunk chosen from the budget gives
the values computed all at once on every route, the plan is there to see (memory_plans and
a DEBUG log), an eager call that runs out of memory all the same is computed again in
smaller chunks, and the peak stays within the budget (measured in a process of its own).
Bad values of both options are rows of the bad-input table (compat_grads.testing._suite.bad_inputs).
"""

import json
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import compat_grads as cg
from compat_grads._src.core.tf import tf
from compat_grads._src.stacking import stack as _stacking
from compat_grads.testing._suite import bad_input_routes as r

RNG = np.random.default_rng(3)
X = RNG.standard_normal((6, 4)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)
SQUARE = RNG.standard_normal((4, 4)).astype(np.float32)


def _mlp(x):
    return tf.tanh(tf.matmul(x, W))


def _energy(x):
    return tf.reduce_sum(tf.tanh(tf.matmul(x, W)) ** 2)


def _per_sample(x):
    return tf.reduce_sum(tf.tanh(tf.matmul(x, W)) ** 2, axis=1)


def _field(x):
    return tf.tanh(tf.matmul(x, SQUARE))


CALLS = [  # id, function, target, options
    ("stacked-reverse", cg.stacked_jacobian, _mlp, {"strategy": "reverse"}),
    ("stacked-forward", cg.stacked_jacobian, _mlp, {"strategy": "forward"}),
    ("stacked-loop", cg.stacked_jacobian, _mlp, {"strategy": "loop"}),
    ("batch-reverse", cg.batch_jacobian, _mlp, {"strategy": "reverse"}),
    ("batch-forward", cg.batch_jacobian, _mlp, {"strategy": "forward"}),
    ("hessian", cg.hessian, _energy, {}),
    ("batch-hessian", cg.batch_hessian, _per_sample, {}),
    ("hessian-diagonal", cg.hessian_diagonal, _energy, {}),
    ("laplacian", cg.laplacian, _energy, {}),
    ("batch-laplacian", cg.batch_laplacian, _per_sample, {}),
    ("batch-hessian-diagonal", cg.batch_hessian_diagonal, _per_sample, {}),
    ("divergence", cg.divergence, _field, {}),
    ("batch-divergence", cg.batch_divergence, _field, {}),
]
ROUTES = ("eager.callable", "eager.uncompiled", "eager.tape", "function.tensor",
          "v1_graph.tensor")
"""One route per mode and target kind (the TF1 graph: the bad-input table's budget row)."""


def _computed(route, function, target, **options):
    """The function's value on the route, and the memory plans its call chose."""
    with cg.memory_plans() as plans:
        value = r.run(route, lambda x: r.call(route, function, target, x, **options), X)
    return value, plans


def _takes_tape(function):
    """Whether `function` takes an eager tensor target with its tape (second derivatives
    need a callable)."""
    return function in (*r.FIRST_ORDER_FUNCTIONS, cg.divergence, cg.batch_divergence)


@pytest.mark.filterwarnings("ignore:.*was compiled .* times:RuntimeWarning")
@pytest.mark.parametrize("route, name, function, target, options", [
    pytest.param(route, *call, id=f"{call[0]}-{route}") for call in CALLS for route in ROUTES
    if route != "eager.tape" or _takes_tape(call[1])])
def test_a_budget_that_chunks_gives_the_values_of_every_row_at_once(route, name, function,
                                                                     target, options):
    whole, plans = _computed(route, function, target, **options)
    # fits: no chunks, so `whole` holds every row computed at once
    assert plans and all(p.chunk_size is None for p in plans), plans
    assert all(p.budget_bytes is not None for p in plans), plans
    first = plans[0]  # about three chunks of the first stack
    in_flight = first.result_bytes + max(1, first.rows // 3) * first.row_bytes
    budget = -(-in_flight * 4 // 3) + 4  # a quarter of a small budget is the runtime's
    chunked, plans = _computed(route, function, target, memory_budget=budget, **options)
    assert any(p.pieces > 1 and p.peak_bytes <= budget for p in plans), plans
    for got, want in zip(np.atleast_1d(chunked), np.atleast_1d(whole)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_choice_is_logged_at_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="compat_grads.memory"):
        cg.stacked_jacobian(_mlp, tf.constant(X), memory_budget=4000)
    (record,) = [rec for rec in caplog.records if rec.name == "compat_grads.memory"]
    assert "stacked_jacobian" in record.getMessage()
    assert "chunk_size=" in record.getMessage() and "budget_bytes=4000" in record.getMessage()


def test_a_compiled_call_reuses_its_trace_and_still_shows_its_plan():
    x = tf.constant(X)
    cg.stacked_jacobian(_field, x, memory_budget=5000)
    with cg.memory_plans() as plans:
        cg.stacked_jacobian(_field, x, memory_budget=5000)
    assert len(plans) == 1 and plans[0].budget_bytes == 5000 and plans[0].pieces > 1


@pytest.fixture
def out_of_memory(monkeypatch):
    """Every attempt to compute more than `limit[0]` rows at once raises TensorFlow's
    ResourceExhaustedError while it is built, as a device that has too little memory for
    them would when it runs."""
    limit = [8]
    computed = _stacking._stack_with

    def stack_with(fn, count, like, vectorize, chunk, *args, **kwargs):
        at_once = count if chunk is None else min(chunk, count)
        if vectorize and at_once > limit[0]:
            raise tf.errors.ResourceExhaustedError(
                None, None, f"OOM when allocating tensor for {at_once} rows (injected)")
        return computed(fn, count, like, vectorize, chunk, *args, **kwargs)
    monkeypatch.setattr(_stacking, "_stack_with", stack_with)
    return limit


def _field_of_twenty_four(x):  # a fresh callable: nothing remembered from another test
    return tf.tanh(tf.matmul(x, SQUARE)) * 2.0


def test_running_out_of_memory_halves_the_chunk_and_warns_once(out_of_memory):
    x = tf.constant(X)  # 24 rows: 24 fails, 12 fails, 6 fits
    with pytest.warns(cg.MemoryWarning) as caught:
        got = cg.stacked_jacobian(_field_of_twenty_four, x, strategy="reverse")
    assert len(caught) == 1
    text = str(caught[0].message)
    assert text.startswith("compat_grads.stacked_jacobian: ran out of memory computing 24 rows")
    assert "chunk_size=6, which fit" in text and "Pass chunk_size=6" in text
    out_of_memory[0] = 10**6
    whole = cg.stacked_jacobian(_field_of_twenty_four, x, strategy="reverse", chunk_size=None)
    np.testing.assert_array_equal(got.numpy(), whole.numpy())
    out_of_memory[0] = 8
    with warnings.catch_warnings(), cg.memory_plans() as plans:
        warnings.simplefilter("error")  # the chunk that fit is remembered: no second warning
        again = cg.stacked_jacobian(_field_of_twenty_four, x, strategy="reverse")
    np.testing.assert_array_equal(again.numpy(), whole.numpy())
    assert [(p.chunk_size, p.budget_bytes) for p in plans] == [(6, None)]


def test_running_out_of_memory_even_one_row_at_a_time_says_so(out_of_memory):
    out_of_memory[0] = 0
    with pytest.raises(tf.errors.ResourceExhaustedError, match=(
            r"compat_grads\.batch_jacobian: ran out of memory even one row \(or column\) at a "
            r"time .*injected.*Pass an int chunk_size=")):
        cg.batch_jacobian(lambda x: tf.tanh(x) * 3.0, tf.constant(X), strategy="reverse")


def test_an_explicit_chunk_size_is_not_retried(out_of_memory):
    with pytest.raises(tf.errors.ResourceExhaustedError, match="injected"):
        cg.stacked_jacobian(lambda x: tf.tanh(x) * 4.0, tf.constant(X), chunk_size=12,
                            strategy="reverse")


WORKER = os.path.join(os.path.dirname(__file__), "budget_worker.py")


def _peak(function, strategy, m, n, budget):
    done = subprocess.run([sys.executable, WORKER, function, strategy, str(m), str(n),
                           str(budget)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("function, strategy, m, n", [
    ("stacked", "reverse", 4000, 10000), ("stacked", "forward", 20000, 2000),
    ("batch", "reverse", 5000, 2000), ("batch", "forward", 5000, 2000)])
def test_the_peak_stays_within_the_budget(function, strategy, m, n):
    """A 160 MB result (float32: m x n, or 4 x m x n per sample) with a budget of 1.5 times
    that: chunked, the values of every row at once, and the process's peak within the
    budget (all at once, forward mode alone peaks at 3.4 times the result)."""
    budget = 240_000_000
    found = _peak(function, strategy, m, n, budget)
    assert found["same"], found
    assert found["result_bytes"] == 160_000_000
    assert found["plans"][0]["pieces"] > 1, found
    assert found["peak_bytes"] <= budget, found


WEIGHTS = RNG.standard_normal((4, 3)).astype(np.float32) / 2


@pytest.mark.parametrize("route", ("eager.callable", "eager.uncompiled", "function.callable",
                                   "v1_graph.callable"))
@pytest.mark.parametrize("function, strategy", [
    (cg.stacked_jacobian, "reverse"), (cg.stacked_jacobian, "forward"),
    (cg.batch_jacobian, "reverse"), (cg.batch_jacobian, "forward")])
def test_a_chunked_result_has_the_gradient_of_every_row_at_once(route, function, strategy):
    """A Jacobian penalty trained through a chunked result (chunk_size="auto" may chunk what
    did not fit): the chunks' slice updates pass the gradient on to every weight."""
    def gradient(chunk):
        def build(x, w):
            f = lambda x: tf.tanh(tf.matmul(x, w))  # noqa: E731
            with tf.GradientTape() as tape:
                jacobian = r.call(route, function, f, x, strategy=strategy, chunk_size=chunk)
                penalty = tf.reduce_sum(jacobian ** 2)
            return tape.gradient(penalty, w)
        return r.run(route, build, X, variables=[WEIGHTS])

    whole = gradient(None)
    assert whole is not None and np.all(np.isfinite(whole))
    np.testing.assert_allclose(gradient(2), whole, rtol=1e-5, atol=1e-6)


def _tanh_twice(x):
    return tf.tanh(x) * 2.0


def test_each_input_shape_gets_its_own_chunk():
    """A compiled callable traced again for a new shape sizes that shape (not a relaxed
    [None], whose sizes are known only at run time and would run all at once)."""
    for n in (1000, 2000, 3000):
        with cg.memory_plans() as plans:
            cg.stacked_jacobian(_tanh_twice, tf.ones([n]), memory_budget=60 * 2**20)
        (plan,) = plans
        assert plan.rows == n and plan.budget_bytes == 60 * 2**20, plans
        assert (plan.chunk_size is None) == (n == 1000) and plan.peak_bytes <= 60 * 2**20


def test_auto_chunks_what_max_bytes_would_refuse_all_at_once():
    x = tf.ones([1000])  # 4 MB result; every row at once about 24 MB
    with cg.memory_plans() as plans:
        got = cg.stacked_jacobian(_tanh_twice, x, max_bytes=8_000_000)
    assert plans[0].chunk_size is not None and plans[0].peak_bytes <= 8_000_000
    np.testing.assert_array_equal(got, cg.stacked_jacobian(_tanh_twice, x, max_bytes=None,
                                                           chunk_size=None))
    with pytest.raises(ValueError, match=r"max_bytes=4000000"):  # the result alone: refused
        cg.stacked_jacobian(_tanh_twice, x, max_bytes=4_000_000)


def test_a_variable_source_shows_its_plan_at_every_call():
    w = tf.Variable(X)
    for _ in range(3):
        with cg.memory_plans() as plans:
            cg.stacked_jacobian(_mlp, w, memory_budget=4000)
        assert len(plans) == 1 and plans[0].budget_bytes == 4000, plans


def test_a_budget_of_one_byte_is_not_the_share_one():
    x = tf.constant(X)
    cg.stacked_jacobian(_field, x, memory_budget=1.0)
    with pytest.raises(ValueError, match=r"memory_budget=1 \(1 B\) is too small"):
        cg.stacked_jacobian(_field, x, memory_budget=1)


def test_a_function_without_chunk_size_keeps_tensorflows_out_of_memory_error():
    def f(x):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM in the target (raised here)")
    with pytest.raises(tf.errors.ResourceExhaustedError, match=r"^OOM in the target"):
        cg.jvp(f, tf.constant(X), tf.constant(X), compile=False)


def _field_of_the_shapes(x):
    return tf.tanh(tf.matmul(x, SQUARE)) * 3.0


def test_a_remembered_chunk_is_for_its_input_shapes_only(out_of_memory):
    with pytest.warns(cg.MemoryWarning, match=r"chunk_size=6, which fit"):
        cg.stacked_jacobian(_field_of_the_shapes, tf.constant(X), strategy="reverse")
    out_of_memory[0] = 10**6
    with warnings.catch_warnings(), cg.memory_plans() as plans:
        warnings.simplefilter("error")
        cg.stacked_jacobian(_field_of_the_shapes, tf.constant(X[:3]), strategy="reverse")
    assert [(p.rows, p.chunk_size) for p in plans] == [(12, None)]
    assert plans[0].budget_bytes is not None  # chosen from the budget, not remembered
