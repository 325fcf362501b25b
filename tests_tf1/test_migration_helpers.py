"""The runtime-checked migration helpers (`compat_grads.migrate.gradient_rows`,
`gradient_row_list`, `fill_gradient_rows`, `row_while_loop`, `gradient_map_fn`) have the
exact semantics of the loops they replace, in a TF1 graph: values, shape, dtype, errors,
whether they vectorize or run the loop."""

import collections

import numpy as np
import pytest

from compat_grads._src.core.tf import tf
from compat_grads._src.stacking.cost import LOOP_ROWS
from compat_grads.migrate import (
    fill_gradient_rows,
    gradient_map_fn,
    gradient_row_list,
    gradient_rows,
    row_while_loop,
)

RNG = np.random.RandomState(0)


def _loop(ys, xs, indices, axis=0, index=0):
    return tf.stack([tf.compat.v1.gradients(ys[i] if axis == 0 else ys[:, i], xs)[index]
                     for i in indices])


def _graph(build):
    """(helper, loop) values and the helper's static shape, from `build()` in a new graph."""
    with tf.Graph().as_default():
        helper, loop = build()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want = session.run([helper, loop])
        return got, want, helper.shape.as_list(), loop.shape.as_list(), helper.dtype


def _model(x, w):
    return tf.tanh(tf.einsum("bi,ijk->bjk", x, w))  # (4, 3, 2): rows have rank 2


CASES = {
    "rows of a rank-3 output": (0, lambda y: range(4)),
    "columns": (1, lambda y: range(3)),
    "some rows, negative and repeated": (0, lambda y: [3, -1, 0, 0]),
    "six-style range object": (0, lambda y: iter(range(2))),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_vectorized_rows_equal_the_loop(name, dtype):
    axis, indices = CASES[name]

    def build():
        x = tf.constant(RNG.randn(4, 5), dtype)
        w = tf.constant(RNG.randn(5, 3, 2), dtype)
        y = _model(x, w)
        return (gradient_rows(y, [w, x], indices(y), axis=axis, index=1),
                _loop(y, [w, x], indices(y), axis, 1))

    got, want, shape, loop_shape, out_dtype = _graph(build)
    assert shape == loop_shape and got.shape == want.shape and out_dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == tf.float64 else 2e-5,
                               atol=1e-6)


def test_it_vectorizes_instead_of_building_a_loop():
    with tf.Graph().as_default() as graph:
        x = tf.constant(RNG.randn(200, 3), tf.float32)
        y = tf.sin(x) * 2.0
        before = len(graph.get_operations())
        gradient_rows(y, x, range(200))
        vectorized = len(graph.get_operations()) - before
        before = len(graph.get_operations())
        _loop(y, x, range(200))
        looped = len(graph.get_operations()) - before
    assert vectorized < looped / 10, (vectorized, looped)


def test_a_variable_source_and_an_unknown_batch():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        v = tf.compat.v1.get_variable("v", initializer=tf.constant(RNG.randn(3, 2), tf.float32))
        y = tf.matmul(x, v) ** 2
        feed = {x: RNG.randn(5, 3)}
        helper, loop = gradient_rows(y, v, range(5)), _loop(y, v, range(5))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want = session.run([helper, loop], feed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ys_kind", ["list of tensors", "integer tensor"])
def test_what_cannot_vectorize_runs_the_loop(ys_kind):
    def build():
        x = tf.constant(RNG.randn(3), tf.float32)
        ys = ([x[0] * x[1], x[2] ** 2] if ys_kind == "list of tensors"
              else tf.cast(x * 10, tf.int32))
        if ys_kind == "integer tensor":  # tf.gradients of an int target: None rows
            with pytest.raises(ValueError):
                gradient_rows(ys, x, range(2))
            with pytest.raises(ValueError):
                _loop(ys, x, range(2))
            return tf.zeros([1]), tf.zeros([1])
        return gradient_rows(ys, x, range(2)), _loop(ys, x, range(2))

    got, want, shape, loop_shape, _ = _graph(build)
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("case", ["source not connected (None rows)",
                                  "index out of range"])
def test_errors_are_the_loops_errors(case):
    def raised(call):
        with pytest.raises(Exception) as info:
            call()
        return type(info.value)

    with tf.Graph().as_default():
        x = tf.constant(RNG.randn(3), tf.float32)
        y = tf.sin(x)
        source, indices = ((tf.constant(1.0), range(3)) if case.startswith("source")
                           else (x, range(4)))
        ours = raised(lambda: gradient_rows(y, source, indices))
        theirs = raised(lambda: _loop(y, source, indices))
    assert ours is theirs


# float32 rows computed vectorized against the loop's rows
TOL = {"rtol": 2e-5, "atol": 1e-6}


def _run(build):
    """The values of the nests `build()` returns, from a new graph, and that graph's op
    types."""
    with tf.Graph().as_default() as graph:
        values = build()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got = session.run(values)
        return got, {op.type for op in graph.get_operations()}


def _net():
    x = tf.constant(RNG.randn(4, 5), tf.float32)
    w = tf.compat.v1.get_variable("w", initializer=tf.constant(RNG.randn(5, 3), tf.float32))
    return x, w, tf.tanh(tf.matmul(x, w))


@pytest.mark.parametrize("index", [0, None], ids=["[0]", "unpacked (g,) ="])
def test_row_list_is_the_loops_list(index, assert_nested_close):
    def build():
        x, w, y = _net()
        rows = gradient_row_list(y, x, range(3), axis=1, index=index)
        assert isinstance(rows, list) and len(rows) == 3
        return rows, [tf.compat.v1.gradients(y[:, i], x)[0] for i in range(3)]

    (got, want), _ = _run(build)
    assert_nested_close(got, want, **TOL)


def test_row_list_keeps_the_cached_rows(assert_nested_close):
    def build():
        x, w, y = _net()
        first = tf.compat.v1.gradients(y[:, 1], x)[0]
        cache = [None, first, None]
        rows = gradient_row_list(y, x, range(3), axis=1, cached=cache)
        assert rows[1] is first and cache == [None, first, None]
        loop = [tf.compat.v1.gradients(y[:, i], x)[0] if cache[i] is None else cache[i]
                for i in range(3)]
        return rows, loop

    (got, want), _ = _run(build)
    assert_nested_close(got, want, **TOL)


def test_row_list_unpacking_more_than_one_gradient_fails_like_the_loop():
    with tf.Graph().as_default():
        x, w, y = _net()
        with pytest.raises(ValueError, match="too many values to unpack"):
            gradient_row_list(y, [x, w], range(2), index=None)
        with pytest.raises(ValueError, match="too many values to unpack"):
            (g,) = tf.compat.v1.gradients(y[0], [x, w])


def test_fill_computes_each_missing_row_once_in_the_loops_order(assert_nested_close):
    def build():
        x, w, y = _net()
        kept = tf.compat.v1.gradients(y[:, 0], x)[0]
        ours, theirs = [kept, None, None], [kept, None, None]
        labels = [2, 0, -1, 2]  # repeated, negative, already cached
        assert fill_gradient_rows(ours, y, x, labels, axis=1) is None
        for i in labels:
            if theirs[i] is None:
                theirs[i] = tf.compat.v1.gradients(y[:, i], x)[0]
        assert ours[0] is kept and ours[1] is None and theirs[1] is None
        return ours[0], ours[2], theirs[0], theirs[2]

    (a, b, c, d), _ = _run(build)
    assert_nested_close([a, b], [c, d], **TOL)


def test_fill_of_a_dict_cache_runs_the_loop(assert_nested_close):
    def build():
        x, w, y = _net()
        cache = {0: None, 1: None}
        fill_gradient_rows(cache, y, w, [1])
        assert cache[0] is None
        return cache[1], tf.compat.v1.gradients(y[1], w)[0]

    (got, want), _ = _run(build)
    assert_nested_close(got, want, **TOL)


def _array_loop(loop, y, params, start=None, size=None):
    """The Levenberg-Marquardt Jacobian: one flattened gradient row per while_loop step."""
    count = tf.shape(y)[0]

    def body(i, acc):
        grads = tf.compat.v1.gradients(y[i], params)
        return i + 1, acc.write(i, tf.concat([tf.reshape(g, [-1]) for g in grads], 0))

    state = [tf.constant(0) if start is None else start,
             tf.TensorArray(tf.float32, size=count if size is None else size)]
    return loop(lambda i, _: i < count, body, state)


def _while(cond, body, loop_vars):
    return tf.compat.v1.while_loop(cond, body, loop_vars)


def test_row_while_loop_vectorizes_the_tensor_array_jacobian():
    def build():
        x, w, y = _net()
        ours = _array_loop(row_while_loop, y, [w, x])
        theirs = _array_loop(_while, y, [w, x])
        assert isinstance(ours, list) and len(ours) == 2
        return ours[0], ours[1].stack(), theirs[0], theirs[1].stack()

    (i, rows, j, want), ops = _run(build)
    assert i == j == 4 and rows.shape == want.shape == (4, 15 + 20)
    np.testing.assert_allclose(rows, want, **TOL)


def test_row_while_loop_runs_the_body_once_vectorized():
    """No while_loop at all: neither the body's own nor one of pfor's over the gradient of
    `y[i]` (`StridedSliceGrad` with a begin per row, which TensorFlow's conversion loops
    over and compat_grads' converter does not)."""
    def loops(loop):
        with tf.Graph().as_default() as graph:
            x, w, y = _net()
            _array_loop(loop, y, [w])[1].stack()
            return [op.name for op in graph.get_operations() if op.type == "Enter"]

    assert loops(_while) and not loops(row_while_loop)


@pytest.mark.parametrize("case", ["random ops in the body", "index starts at 1",
                                  "the body reads the TensorArray"])
def test_row_while_loop_runs_the_loop_when_it_must(case, assert_nested_close):
    def build():
        x, w, y = _net()

        def body(i, acc):
            if case == "the body reads the TensorArray":
                acc.size()
            row = tf.compat.v1.gradients(y[i], x)[0]
            if case == "random ops in the body":
                row = row * tf.random.stateless_uniform([], [1, 2]) + tf.random.uniform(
                    [], seed=3) * 0
            return i + 1, acc.write(i, row)

        start = 1 if case == "index starts at 1" else 0
        state = lambda: [tf.constant(start), tf.TensorArray(tf.float32, size=4)]  # noqa: E731
        tf.compat.v1.set_random_seed(0)
        ours = row_while_loop(lambda i, _: i < 4, body, state())
        looped.extend(op.name for op in tf.compat.v1.get_default_graph().get_operations()
                      if op.type == "Enter" and "/pfor/" not in op.name)
        rows = ours[1].gather(tf.range(start, 4))
        theirs = tf.compat.v1.while_loop(lambda i, _: i < 4, body, state())
        return ours[0], rows, theirs[0], theirs[1].gather(tf.range(start, 4))

    looped = []
    (i, rows, j, want), ops = _run(build)
    assert looped and i == j == 4
    assert_nested_close(rows, want, **TOL)


def test_row_while_loop_with_a_tape_in_the_body(assert_nested_close):
    def build():
        x, w, _ = _net()

        def body(i, acc):
            with tf.GradientTape() as tape:
                tape.watch(x)
                yi = tf.tanh(tf.matmul(x, w))[i]
            return i + 1, acc.write(i, tape.gradient(yi, x))

        state = lambda: [0, tf.TensorArray(tf.float32, size=4)]  # noqa: E731
        ours = row_while_loop(lambda i, _: i < 4, body, state())
        theirs = tf.compat.v1.while_loop(lambda i, _: i < 4, body, state())
        return ours[1].stack(), theirs[1].stack()

    (got, want), ops = _run(build)
    assert_nested_close(got, want, **TOL)


def test_gradient_map_fn_equals_map_fn_and_the_analytic_score(assert_nested_close):
    values = np.random.RandomState(5).randn(6).astype(np.float32)

    def build():
        x = tf.constant(values)

        def score(e):
            return tf.compat.v1.gradients(-0.5 * e * e + tf.sin(e), e)[0]

        return gradient_map_fn(score, x), tf.compat.v1.map_fn(score, x)

    (got, want), ops = _run(build)
    assert_nested_close(got, want, **TOL)
    np.testing.assert_allclose(got, -values + np.cos(values), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variable", [False, True], ids=["tensor", "variable"])
def test_rows_of_a_gathered_source_stay_indexed_slices(variable):
    """Rows with respect to an embedding read through tf.gather are IndexedSlices in the
    loop, and a program may use them as such (`g.indices`): the helpers keep the loop."""
    table = RNG.rand(6, 3).astype(np.float32)
    with tf.Graph().as_default():
        emb = tf.compat.v1.Variable(table) if variable else tf.constant(table)
        logits = tf.matmul(tf.gather(emb, [1, 4]), tf.constant(RNG.rand(3, 4), tf.float32))
        listed = gradient_row_list(logits, emb, range(4), axis=1)
        loop = [tf.compat.v1.gradients(logits[:, c], emb)[0] for c in range(4)]
        assert all(isinstance(row, tf.IndexedSlices) for row in listed)
        stacked = gradient_rows(logits, emb, range(4), axis=1)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got, want, got_stacked = session.run([listed, loop, stacked])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.indices, w.indices)
        np.testing.assert_array_equal(g.values, w.values)
    assert got_stacked.shape == (4, 6, 3)


# -- where the static rule (compat_grads._src.stacking.cost) keeps the loop -------------


def _class_net():
    """A small conv net's logits for 10 classes: the rule runs these rows one by one."""
    x = tf.constant(RNG.randn(3, 8, 8, 1), tf.float32)
    kernel = tf.constant(RNG.randn(3, 3, 1, 4), tf.float32)
    dense = tf.constant(RNG.randn(4 * 4 * 4, 10), tf.float32)
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")), 2, 2, "VALID")
    return x, tf.matmul(tf.reshape(h, [3, -1]), dense)


def _backward_ops(tensor, forward):
    """The ops `tensor` needs beyond those `forward` needs."""
    def ancestors(t):
        seen, todo = set(), [t.op]
        while todo:
            op = todo.pop()
            if op.name not in seen:
                seen.add(op.name)
                todo.extend(i.op for i in op.inputs)
        return seen
    return ancestors(tensor) - ancestors(forward)


@pytest.mark.parametrize("helper", ["gradient_rows", "gradient_row_list"])
def test_class_rows_through_a_conv_net_run_the_loop(helper, assert_nested_close):
    def build():
        x, logits = _class_net()
        if helper == "gradient_rows":
            ours = gradient_rows(logits, x, range(10), axis=1)
        else:
            ours = gradient_row_list(logits, x, range(10), axis=1)
        pfor.extend(op.name for op in tf.compat.v1.get_default_graph().get_operations()
                    if "pfor" in op.name)
        return ours, [tf.compat.v1.gradients(logits[:, c], x)[0] for c in range(10)]

    pfor = []
    (got, want), ops = _run(build)
    assert not pfor and not any(kind in ops for kind in ("While", "Enter", "Unpack"))
    assert_nested_close(list(got), want, **TOL)


@pytest.mark.parametrize("cached", [None, [None] * 3], ids=["a list", "a cache"])
def test_a_listed_row_computes_only_itself(cached):
    """Rows kept as a list (gradient_row_list, fill_gradient_rows) are fetched a row at a
    time by real code (a saliency map's sess.run(grads[k]), a class-gradient cache):
    fetching one row runs that row's pass alone."""
    with tf.Graph().as_default():
        x, w, y = _net()
        rows = gradient_row_list(y, x, range(3), axis=1, cached=cached)
        again = gradient_row_list(y, x, range(3), axis=1, cached=[rows[0], None, rows[2]])
        passes = [_backward_ops(row, y) for row in (*rows, again[1])]
        assert all(passes) and all(not a & b for k, a in enumerate(passes)
                                   for b in passes[k + 1:])
        assert again[0] is rows[0] and again[2] is rows[2]
        filled = [None] * 3
        fill_gradient_rows(filled, y, x, [2, 0], axis=1)
        first, last = _backward_ops(filled[0], y), _backward_ops(filled[2], y)
        assert filled[1] is None and first and last and not first & last


def test_row_while_loop_keeps_the_loop_for_large_rows(assert_nested_close):
    """A Hessian through a wide batch: each row's ops are over the rule's ROW_BYTES, so the
    while_loop runs (no pfor), with its values."""
    def build():
        x = tf.constant(RNG.randn(512, 6), tf.float32)
        theta = tf.constant(RNG.randn(6 * 64), tf.float32)
        loss = tf.reduce_mean(tf.tanh(tf.matmul(x, tf.reshape(theta, [6, 64]))) ** 2)
        grad = tf.compat.v1.gradients(loss, theta)[0]

        def body(i, acc):
            return i + 1, acc.write(i, tf.compat.v1.gradients(grad[i], theta)[0])

        state = lambda: [0, tf.TensorArray(tf.float32, size=6 * 64)]  # noqa: E731
        ours = row_while_loop(lambda i, _: i < 6 * 64, body, state())[1].stack()
        looped.extend(op.name for op in tf.compat.v1.get_default_graph().get_operations()
                      if "pfor" in op.name)
        return ours, tf.compat.v1.while_loop(lambda i, _: i < 6 * 64, body, state())[1].stack()

    looped = []
    (got, want), ops = _run(build)
    assert not looped and "Enter" in ops
    assert_nested_close(got, want, **TOL)


def test_map_fn_through_a_conv_net_runs_map_fn(assert_nested_close):
    def build():
        kernel = tf.constant(RNG.randn(3, 3, 1, 2), tf.float32)
        images = tf.constant(RNG.randn(4, 6, 6, 1), tf.float32)

        def saliency(image):
            out = tf.nn.conv2d(image[None], kernel, 1, "SAME")
            return tf.compat.v1.gradients(tf.reduce_sum(tf.sin(out)), image)[0]

        ours = gradient_map_fn(saliency, images)
        pfor.extend(op.name for op in tf.compat.v1.get_default_graph().get_operations()
                    if "pfor" in op.name)
        return ours, tf.map_fn(saliency, images)

    pfor = []
    (got, want), _ = _run(build)
    assert not pfor
    assert_nested_close(got, want, **TOL)


def _built(build):
    """The op types `build()` adds to a new graph."""
    with tf.Graph().as_default() as graph:
        build()
        return collections.Counter(op.type for op in graph.get_operations())


def _loops(counts) -> bool:
    return counts["Enter"] > 0


@pytest.mark.parametrize("rows", [LOOP_ROWS, LOOP_ROWS + 1])
def test_few_rows_keep_the_loop_which_builds_faster(rows):
    """Up to LOOP_ROWS rows the helpers build the loop they replace, op for op (as fast to
    run, pfor's conversion dearer to build); one more row, and they vectorize."""
    def rows_of(helper):
        x = tf.constant(RNG.randn(rows, 3), tf.float32)
        return helper(tf.sin(x) * 2.0, x, range(rows))

    def array_loop(loop):
        x = tf.constant(RNG.randn(rows, 3), tf.float32)
        y = tf.reduce_sum(tf.sin(x), 1)

        def body(i, acc):
            return i + 1, acc.write(i, tf.compat.v1.gradients(y[i], x)[0])
        return loop(lambda i, _: i < rows, body, [tf.constant(0), tf.TensorArray(
            tf.float32, size=rows)])

    def mapped(helper):
        x = tf.constant(RNG.randn(rows), tf.float32)
        return helper(lambda e: tf.compat.v1.gradients(tf.sin(e) * e, e)[0], x)

    few = rows <= LOOP_ROWS
    assert (_built(lambda: rows_of(gradient_rows)) == _built(lambda: rows_of(_loop))) == few
    assert _loops(_built(lambda: array_loop(row_while_loop))) == few
    assert _loops(_built(lambda: mapped(gradient_map_fn))) == few
    assert _loops(_built(lambda: array_loop(_while)))
    assert _loops(_built(lambda: mapped(tf.compat.v1.map_fn)))
