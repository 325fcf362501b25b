"""The public functions: validate, ask the shim for a backend, compose, return."""

from __future__ import annotations

from compat_grads import _distribute, _jacobians, _models, _options, dispatch
from compat_grads import _structure as st
from compat_grads._errors import describe, message
from compat_grads._options import MAX_BYTES
from compat_grads._tf import tf
from compat_grads._types import Nest, Strategy, Target, TensorLike, Unconnected

# AutoGraph must not rewrite the library when a user's tf.function calls it: its Python
# control flow is on Python values only, and converting it would cost time at every trace.
_library_code = tf.autograph.experimental.do_not_convert


@_library_code
def stacked_jacobian(target: Target, sources: Nest, *, tape: tf.GradientTape | None = None,
                     strategy: Strategy = "auto", unconnected_gradients: Unconnected = "none",
                     chunk_size: int | None = None, max_bytes: int | None = MAX_BYTES,
                     compile: bool = True, jit_compile: bool = False, distribute=None,
                     gather: bool = True) -> Nest:
    """The full Jacobian of `target` with respect to each source.

    Shape: `J[k].shape == y.shape + x_k.shape`, `J[k][i..., j...] = d y[i...] / d x_k[j...]`.

    Args:
      target: the tensor `y` (graph mode and `tf.function`; in eager mode together with the
        `tape` that recorded it), or a callable `f(sources) -> y` (every mode).
      sources: a tensor, a variable, or a list / tuple / dict nest of them. A tensor given
        twice (`[x, x]`) gets the total derivative in each place, as `tf.gradients` gives.
      tape: the `tf.GradientTape` that recorded an eager tensor target (a variable target
        is read on it).
      strategy: "auto" (forward mode when the sources are smaller than the target, else
        reverse; the rows vectorized, or one by one where that is faster, by the rule
        in the Performance guide), "reverse" (vectorized VJPs over target
        elements), "forward" (vectorized JVPs over source elements) or "loop" (one row at
        a time in a `while_loop`, the lowest memory). All give the same values.
      unconnected_gradients: "none" (None for a source the target does not depend on) or
        "zero" (zeros of the block's shape); a `tf.UnconnectedGradients` works too.
      chunk_size: at most this many rows (or columns) in flight at once, to bound memory.
      max_bytes: the most memory, in bytes, the result and the rows in flight at once may
        take (default 16 GiB); a larger Jacobian raises ValueError at once, before anything
        is built or run. Sizes known only at run time are not counted; None: no limit.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.
      distribute: a `tf.distribute.Strategy` whose replicas share the work (rows of the flattened
        target each; columns, i.e. elements of each source, for a callable with strategy="forward"),
        or a list of device names (the TF1 way: the pieces are placed with `tf.device` in one
        graph). `chunk_size` applies within each piece. See the "Several devices and workers" page.
      gather: with `distribute`, return one tensor per block (True), or the pieces
        (False): the strategy's per-replica values, or a list with one result per device,
        each block holding the piece's rows `[rows] + x.shape` (or its columns,
        `y.shape + [columns]`).

    Returns:
      The blocks in the structure of `sources`, each with its source's dtype.

    Raises:
      TypeError: for a target that is neither a float tensor nor a callable (or a callable
        that returns None), non-float, ragged or sparse sources, or an option of the wrong
        type (a list for strategy=, a string for a bool).
      ValueError: for empty sources, an unknown strategy, a target and sources from two
        different graphs, or a Jacobian larger than `max_bytes`.
      compat_grads.ModeError: for an eager tensor target without its tape, a source the
        tape never watched, a target another recording tape recorded, or graph tensors used
        outside their graph's `as_default()` block.
      compat_grads.DerivativeError: for what TensorFlow cannot differentiate row by row: a
        tensor target computed by a `tf.py_function` or a TF1 `tf.while_loop` (pass the
        callable, which then runs again for each row, with a `VectorizationWarning`).

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.stacked_jacobian(lambda x: tf.stack([x[0] * x[1], x[1] ** 2]), x).numpy()
      array([[2., 1.],
             [0., 4.]], dtype=float32)

    Migrating from TF1:
      Before: `tf.stack([tf.gradients(y[i], x)[0] for i in range(100)])` (100 gradient
      graphs, and an extra axis if you `expand_dims`). After:
      `cg.stacked_jacobian(y, x)`, one graph of constant size, shape `y.shape + x.shape`.
    """
    name = "stacked_jacobian"
    options = _options.check(name, {
        "tape": tape, "strategy": strategy, "chunk_size": chunk_size,
        "unconnected_gradients": unconnected_gradients, "max_bytes": max_bytes},
        compile=compile, jit_compile=jit_compile)
    if distribute is not None:
        return _distributed(stacked_jacobian, target, sources, distribute, gather, compile,
                            jit_compile, _distribute.jacobian_split, options)
    if run := dispatch.compiled(stacked_jacobian, target, (sources,), options, compile,
                                jit_compile):
        return run()
    problem = st.make_problem(name, target, sources, tape)
    backend = dispatch.backend_for(problem)
    (blocks,) = _jacobians.jacobian_blocks(backend, problem.flat, _options.how(options))
    return problem.pack(blocks)


@_library_code
def per_element_gradients(target: Target, sources: Nest, *,
                          tape: tf.GradientTape | None = None,
                          unconnected_gradients: Unconnected = "none", compile: bool = True,
                          jit_compile: bool = False) -> Nest:
    """dy/dx with the shape of `y`: the Jacobian summed over each source's axes.

    Shape: `G[k].shape == y.shape`, `G[k][i...] = sum_j d y[i...] / d x_k[j...]` (`J_k·1`).
    Computed as one forward-mode product per source, never by building the Jacobian.
    Compare `tf.gradients(y, x)`, which sums over `y` instead and has the shape of `x`.

    Args:
      target: the tensor `y` (graph mode and `tf.function`; in eager mode together with the
        `tape` that recorded it), or a callable `f(sources) -> y` (every mode).
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      tape: the `tf.GradientTape` that recorded an eager tensor target.
      unconnected_gradients: "none" or "zero", as in `stacked_jacobian`.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.

    Returns:
      One `y`-shaped tensor per source, in the structure of `sources`, in the source's dtype.

    Raises:
      TypeError, ValueError, compat_grads.ModeError: as `stacked_jacobian`.
      compat_grads.DerivativeError: where a graph cannot differentiate the gradient (the
        forward-mode product), e.g. through a TF1 `tf.while_loop`.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant(2.0)
      >>> cg.per_element_gradients(lambda x: tf.stack([x ** 2, x ** 3]), x).numpy()
      array([ 4., 12.], dtype=float32)

    Migrating from TF1:
      Before: the forward-mode trick, `g = tf.gradients(y, x, grad_ys=u)[0]` with a dummy
      `u` shaped like `y`, then `tf.gradients(g, u)[0]`; or a Jacobian summed over x's axes.
      After: `cg.per_element_gradients(y, x)`. A Python loop of `tf.gradients(y[i], x)` is
      another quantity, the Jacobian's rows (`y.shape[:1] + x.shape`): that is
      `cg.stacked_jacobian(y, x)`. Where each `y[i]` depends on `x[i]` alone (a PINN's
      `u(x)` on collocation points), plain `tf.gradients(y, x)` is already this result
      and one reverse pass: keep it (docs: "When not to switch").
    """
    name = "per_element_gradients"
    options = _options.check(name, {"tape": tape,
                                    "unconnected_gradients": unconnected_gradients},
                             compile=compile, jit_compile=jit_compile)
    if run := dispatch.compiled(per_element_gradients, target, (sources,), options, compile,
                                jit_compile):
        return run()
    problem = st.make_problem(name, target, sources, tape)
    backend = dispatch.backend_for(problem)
    return problem.pack(_jacobians.per_element(backend, problem.flat, _options.how(options)))


@_library_code
def batch_jacobian(target: Target, source: TensorLike, *,
                   tape: tf.GradientTape | None = None, strategy: Strategy = "auto",
                   unconnected_gradients: Unconnected = "none", independent: bool = True,
                   chunk_size: int | None = None, max_bytes: int | None = MAX_BYTES,
                   compile: bool = True, jit_compile: bool = False, distribute=None,
                   gather: bool = True) -> tf.Tensor | None:
    """Per-sample Jacobians of a batched target with respect to a batched source.

    Shape: `[b] + y.shape[1:] + x.shape[1:]`, `B[s, i..., j...] = d y[s, i...] / d x[s, j...]`.
    A target of shape `(b,)` (one scalar per sample) gives per-sample gradients, `x.shape`.
    The batch size may be unknown until run time, in TF1 graphs too.

    Caveat: with `independent=True` (the default) samples are assumed independent (`y[s]`
    depends on `x[s]` only): one pass per per-sample element. Cross-sample terms (BatchNorm in
    training mode, attention across the batch) are then silently added in.
    `independent=False` takes the per-sample blocks of the full Jacobian instead: exact for
    coupled samples, at b times the cost and memory.

    Args:
      target: the batched tensor `y` (with `tape` in eager mode) or a callable `f(x) -> y`.
      source: one batched tensor or variable `x`.
      tape: the `tf.GradientTape` that recorded an eager tensor target.
      strategy: as `stacked_jacobian`, over per-sample elements.
      unconnected_gradients: "none" or "zero", as in `stacked_jacobian`.
      independent: whether samples are independent (see the caveat).
      chunk_size: at most this many rows (or columns) in flight at once, to bound memory.
      max_bytes: the most memory, in bytes, the result and the rows in flight at once may
        take (default 16 GiB); a larger Jacobian raises ValueError at once, before anything
        is built or run. Sizes known only at run time are not counted; None: no limit.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.
      distribute: a `tf.distribute.Strategy` whose replicas share the samples (each computes the
        Jacobians of its share), or a list of device names (the TF1 way: the pieces are placed with
        `tf.device` in one graph); `chunk_size` applies within each piece. Needs a callable target
        and independent=True. See the "Several devices and workers" page.
      gather: with `distribute`, return one result (True), or the pieces (False): the
        strategy's per-replica values, or a list with one result per device.

    Returns:
      The per-sample Jacobians, in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: when target or source has no leading dimension, their batch sizes
        differ (checked at run time when unknown while building the graph), or the result
        would take more than `max_bytes`.
      TypeError, compat_grads.ModeError: as `stacked_jacobian`.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
      >>> cg.batch_jacobian(lambda x: x ** 2, x).shape
      TensorShape([2, 2, 2])

    Migrating from TF1:
      Before: `parallel_for.gradients.batch_jacobian(y, x)` (private; crashes on an unknown
      batch size in a v1 Graph inside TF2). After: `cg.batch_jacobian(y, x)`.
    """
    name = "batch_jacobian"
    options = _options.check(name, {
        "tape": tape, "strategy": strategy, "chunk_size": chunk_size,
        "unconnected_gradients": unconnected_gradients, "independent": independent,
        "max_bytes": max_bytes}, compile=compile, jit_compile=jit_compile)
    if distribute is not None:
        return _distributed(batch_jacobian, target, source, distribute, gather, compile,
                            jit_compile, _sample_split, options)
    if run := dispatch.compiled(batch_jacobian, target, (source,), options, compile,
                                jit_compile):
        return run()
    problem = st.make_problem(name, target, source, tape, argument="source")
    (flat_source,) = _single_source(name, problem)
    backend = dispatch.backend_for(problem)
    compute = (_jacobians.batch_jacobian_block if independent
               else _jacobians.exact_batch_jacobian)
    with st.after(st.check_batch(name, backend.target, flat_source)):
        return compute(backend, flat_source, _options.how(options))


def _single_source(name, problem):
    if len(problem.flat) != 1 or tf.nest.is_nested(problem.structure):
        raise TypeError(message(
            name, f"source must be one tensor or variable, but got a "
            f"{type(problem.structure).__name__} of {len(problem.flat)}",
            "Call it once per source, or use stacked_jacobian for a nest of sources."))
    return problem.flat


@_library_code
def per_example_gradients(loss_fn, model, x, y, *, weights: Nest = None,
                          independent: bool = True, strategy: Strategy = "auto",
                          unconnected_gradients: Unconnected = "none",
                          chunk_size: int | None = None, max_bytes: int | None = MAX_BYTES,
                          compile: bool = True, jit_compile: bool = False, distribute=None,
                          gather: bool = True) -> Nest:
    """Per-example gradients of a loss with respect to a model's weights.

    Shape: `G[k].shape == [b] + w_k.shape`, `G[k][s] = d loss_s / d w_k`, where
    `loss_s = sum(loss_fn(y[s:s+1], model(x[s:s+1])))` is example s's loss. With
    `independent=True` (the default) each example runs forward and backward on its own,
    vectorized over the batch: about the cost of one batched gradient, not of b gradients.
    That is exact when examples do not interact; BatchNorm in training mode (or anything
    else that mixes the batch) needs `independent=False`: the rows of the Jacobian of the
    batch's per-example losses, exact for coupled examples, at b backward passes through
    the whole batch.

    Args:
      loss_fn: `loss_fn(y_true, y_pred) -> per-example losses`, shape `[b]` or `[b, ...]`
        (summed per example): a Keras loss function, or a `tf.keras.losses.Loss` with
        `reduction="none"`.
      model: a `tf_keras` model or layer (Keras 3 too, outside TF1 graphs), or any
        callable `model(x) -> y_pred`. Call it in training mode with
        `lambda x: model(x, training=True)` (Dropout then draws a mask per example).
      x: the batch of inputs (a tensor or a nest of tensors, batch axis first).
      y: the batch of labels (a tensor or a nest, batch axis first), passed to `loss_fn`.
      weights: the variables (a list, tuple or dict nest) the model reads (tensors it
        reads by closure work too); default `model.trainable_weights`.
      independent: whether examples are independent (see above).
      strategy: "auto" or "reverse" (vectorized with pfor) or "loop" (a `while_loop` over
        examples, the lowest memory).
      unconnected_gradients: "none" (None for a weight the loss does not use) or "zero".
      chunk_size: at most this many examples in flight at once, to bound memory.
      max_bytes: the most memory, in bytes, the result and the examples in flight at once
        may take (default 16 GiB), as in `stacked_jacobian`; None: no limit.
      compile: in eager mode, trace once per model, options and input shapes and cache the
        tf.function (False: run it eagerly under tapes).
      jit_compile: compile that tf.function with XLA.
      distribute: a `tf.distribute.Strategy` whose replicas share the examples (each computes its
        share's gradients), or a list of device names (the TF1 way: the pieces are placed with
        `tf.device` in one graph); `chunk_size` applies within each piece. Needs independent=True.
        See the "Several devices and workers" page.
      gather: with `distribute`, return one result (True), or the pieces (False): the
        strategy's per-replica values, or a list with one result per device.

    Returns:
      The per-example gradients in the structure of `weights`, each in its weight's dtype.

    Raises:
      TypeError: for a model or loss that is not callable, weights=None without Keras
        trainable weights, or non-float weights.
      ValueError: for a loss that is not one per example, strategy="forward", or
        gradients larger than `max_bytes`.
      compat_grads.ModeError: for a Keras 3 model in a TF1 graph.

    Example (per-example clipping, as in DP-SGD):
      >>> import compat_grads as cg
      >>> tf.keras.utils.set_random_seed(0)
      >>> model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
      >>> x, y = tf.ones([8, 3]), tf.zeros([8, 1])
      >>> grads = cg.per_example_gradients(tf.keras.losses.mean_squared_error, model, x, y)
      >>> [g.shape.as_list() for g in grads]  # kernel (3, 1) and bias (1,), per example
      [[8, 3, 1], [8, 1]]
      >>> norms = tf.sqrt(sum(tf.reduce_sum(tf.reshape(g, [8, -1]) ** 2, 1) for g in grads))
      >>> scale = tf.minimum(1.0, 1.0 / norms)  # clip each example to norm 1, then average
      >>> update = [tf.reduce_mean(g * tf.reshape(scale, [8] + [1] * (g.shape.rank - 1)), 0)
      ...           for g in grads]
      >>> [u.shape.as_list() for u in update]
      [[3, 1], [1]]

    Migrating from TF1:
      Before: a Python loop of `tf.gradients(loss[i], weights)` over the batch (b gradient
      graphs, a fixed batch size), or `tf.map_fn` over examples. After:
      `cg.per_example_gradients(loss_fn, model, x, y)`, one graph, any batch size.
    """
    name = "per_example_gradients"
    options = _options.check(name, {
        "loss_fn": loss_fn, "independent": independent, "strategy": strategy,
        "unconnected_gradients": unconnected_gradients, "chunk_size": chunk_size,
        "max_bytes": max_bytes}, compile=compile, jit_compile=jit_compile)
    weights = _models.default_weights(name, model, weights)
    x, y = _models.as_tensors(name, "x", x), _models.as_tensors(name, "y", y)
    if distribute is not None:
        _distribute.check(name, distribute, gather, compile)
        _independent_for(name, options.pop("independent"))
        options.update(distribute=_distribute.hashable(distribute), gather=gather)
        if run := dispatch.compiled(_per_example_distributed, model, (weights, x, y),
                                    options, compile, jit_compile, bind_sources=True):
            return run()
        return _per_example_distributed(model, weights, x, y, **options)
    if run := dispatch.compiled(_per_example_gradients, model, (weights, x, y), options,
                                compile, jit_compile, bind_sources=True):
        return run()
    return _per_example_gradients(model, weights, x, y, **options)


def _per_example_gradients(model, weights, x, y, *, compile=False, **options):
    """The body of `per_example_gradients`, after its options were checked."""
    name = "per_example_gradients"
    loss_fn, independent = options["loss_fn"], options["independent"]
    _models.check_callables(name, loss_fn, model)
    dispatch.check_model_mode(name, model)
    how = _options.how(options)
    if how.strategy == "forward":
        raise ValueError(message(
            name, "strategy must be 'auto', 'reverse' or 'loop', but got 'forward' (each "
            "example has one scalar loss: reverse mode is always cheaper)",
            "Drop strategy=, or pass strategy='loop' for the lowest memory."))
    count = _models.batch_size(name, x)
    with st.after(_models.check_batches(name, x, y)):
        return _per_example(name, loss_fn, model, weights, (x, y, count), how, independent)


def _per_example(name, loss_fn, model, weights, batch, how, independent):
    """`batch` is (inputs, labels, number of examples: an int when static)."""
    x, y, count = batch
    static = count if isinstance(count, int) else None

    def losses(xs, ys, batch):
        return _models.per_example_losses(name, loss_fn, model, xs, ys, batch)

    if not independent:
        problem = st.make_problem(name, lambda ws: losses(x, y, static), weights,
                                  argument="weights")
        backend = dispatch.backend_for(problem)
        (blocks,) = _jacobians.jacobian_blocks(backend, problem.flat, how.using(
            "reverse" if how.strategy == "auto" else how.strategy))
        return problem.pack(blocks)

    def loss_of_example(i):
        return lambda ws: tf.reduce_sum(losses(_models.example(x, i), _models.example(y, i), 1))

    # Example 0's problem picks the backend; the graph backend also walks its forward pass
    # for TF1 control flow before trying pfor (ops that nothing runs).
    problem = st.make_problem(name, loss_of_example(0), weights, argument="weights")
    backend = dispatch.backend_for(problem)
    return problem.pack(_jacobians.per_example_rows(backend, loss_of_example, count, how))


@_library_code
def hessian(target: Target, sources: Nest, *, strategy: Strategy = "auto",
            unconnected_gradients: Unconnected = "none", chunk_size: int | None = None,
            max_bytes: int | None = MAX_BYTES, compile: bool = True,
            jit_compile: bool = False, distribute=None, gather: bool = True) -> Nest:
    """Second derivatives of `target`, cross terms between sources included.

    Shape: `H[i][j].shape == y.shape + x_i.shape + x_j.shape`, i.e. `x.shape + x.shape` for a
    scalar target and one source; `H[i][j][a..., b..., c...] = d² y[a...] / d x_i[b...]
    d x_j[c...]`. For a nest of sources the result is a nest of nests (blocks by row source,
    then column source).

    Computed as the Jacobian of the gradient: forward-over-reverse when a callable runs in
    eager mode, reverse-over-reverse in graphs ("auto"); "forward", "reverse" or "loop" pick
    the outer direction. A non-scalar target is one loop over (target element, source
    element) pairs, never a loop inside a loop.

    Args:
      target: a callable `f(sources) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function` (an eager tensor cannot be differentiated twice after the fact).
      sources: a tensor, a variable, or a list / tuple / dict nest of them.
      strategy: "auto", "forward", "reverse" or "loop" (the outer Jacobian's direction).
      unconnected_gradients: "none" gives None for a block whose sources do not reach the
        gradient; "zero" gives zeros.
      chunk_size: at most this many rows (or columns) in flight at once, to bound memory.
      max_bytes: the most memory, in bytes, the result and the rows in flight at once may
        take (default 16 GiB); a larger Jacobian raises ValueError at once, before anything
        is built or run. Sizes known only at run time are not counted; None: no limit.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.
      distribute: a `tf.distribute.Strategy` whose replicas share the rows (of the target's first
        Jacobian, flattened), or a list of device names (the TF1 way: the pieces are placed with
        `tf.device` in one graph); `chunk_size` applies within each piece. Needs a callable target.
        See the "Several devices and workers" page.
      gather: with `distribute`, return one result (True), or the pieces (False): the
        strategy's per-replica values, or a list with one result per device.

    Returns:
      The blocks, in the structure of `sources` nested in itself, each in the dtype of its
      column source.

    Raises:
      compat_grads.ModeError: for an eager tensor target or a tape.
      TypeError, ValueError: as `stacked_jacobian` (a Hessian larger than `max_bytes` too).

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.hessian(lambda x: x[0] ** 2 * x[1], x).numpy()
      array([[4., 2.],
             [2., 0.]], dtype=float32)

    Migrating from TF1:
      Before: `tf.hessians(y, x)` (graph only, one row at a time, no cross terms between
      sources). After: `cg.hessian(y, x)` in graphs, `cg.hessian(f, x)` everywhere.
    """
    name = "hessian"
    options = _options.check(name, {
        "strategy": strategy, "chunk_size": chunk_size,
        "unconnected_gradients": unconnected_gradients, "max_bytes": max_bytes},
        compile=compile, jit_compile=jit_compile)
    if distribute is not None:
        _callable_for(name, target, "the replicas differentiate it twice")
        return _distributed(hessian, target, sources, distribute, gather, compile,
                            jit_compile, _distribute.hessian_split, options)
    if run := dispatch.compiled(hessian, target, (sources,), options, compile, jit_compile):
        return run()
    problem = st.make_problem(name, target, sources)
    backend = dispatch.backend_for(problem, order=2)
    blocks = _jacobians.hessian_blocks(backend, problem.flat, _options.how(options))
    return problem.pack([problem.pack(row) for row in blocks])


@_library_code
def batch_hessian(target: Target, source: TensorLike, *, strategy: Strategy = "auto",
                  unconnected_gradients: Unconnected = "none", independent: bool = True,
                  chunk_size: int | None = None, max_bytes: int | None = MAX_BYTES,
                  compile: bool = True, jit_compile: bool = False, distribute=None,
                  gather: bool = True) -> tf.Tensor | None:
    """Per-sample Hessians of per-sample scalars.

    Shape: `[b] + x.shape[1:] + x.shape[1:]`, `B[s, i..., j...] = d² y[s] / d x[s, i...]
    d x[s, j...]`, for a target of shape `(b,)` or `(b, 1)`.

    With `independent=True` (the default) it is the batch Jacobian of the batch-summed
    gradient: O(d) passes for d features per sample, not O(b·d). That assumes samples do not
    interact (`y[s]` depends on `x[s]` only); with BatchNorm in training mode, attention
    across the batch or any other coupling the result silently includes cross-sample terms.
    `independent=False` takes the exact per-sample blocks of the full Hessian instead:
    correct for coupled samples, at O(b·d) passes and O(b³·d²) memory.

    Args:
      target: a callable `f(x) -> y` (every mode), or the tensor `y` in a graph or
        `tf.function`.
      source: one batched tensor or variable `x`.
      strategy: "auto", "forward", "reverse" or "loop", as in `hessian`.
      unconnected_gradients: "none" or "zero".
      independent: whether samples are independent (see above).
      chunk_size: at most this many rows (or columns) in flight at once, to bound memory.
      max_bytes: the most memory, in bytes, the result and the rows in flight at once may
        take (default 16 GiB); a larger Jacobian raises ValueError at once, before anything
        is built or run. Sizes known only at run time are not counted; None: no limit.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.
      distribute: a `tf.distribute.Strategy` whose replicas share the samples (each computes the
        Hessians of its share), or a list of device names (the TF1 way: the pieces are placed with
        `tf.device` in one graph); `chunk_size` applies within each piece. Needs a callable target
        and independent=True. See the "Several devices and workers" page.
      gather: with `distribute`, return one result (True), or the pieces (False): the
        strategy's per-replica values, or a list with one result per device.

    Returns:
      The per-sample Hessians in the source's dtype (None if unconnected and "none").

    Raises:
      ValueError: if the target is not one scalar per sample, batch sizes differ (checked
        at run time when unknown while building the graph), or the Hessians would take
        more than `max_bytes`.
      compat_grads.ModeError: for an eager tensor target or a tape.
      TypeError: as `stacked_jacobian`.

    Example:
      >>> import compat_grads as cg
      >>> xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
      >>> f = lambda xy: 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2
      >>> cg.batch_hessian(f, xy).numpy()[1]  # [[6y, 6x], [6x, 2]] at x=1, y=8
      array([[48.,  6.],
             [ 6.,  2.]], dtype=float32)

    Migrating from TF1:
      Before: nested tapes and `tape.batch_jacobian`, or `tf.hessians(tf.reduce_sum(y), x)`
      (mixes samples). After: `cg.batch_hessian(f, x)`.
    """
    name = "batch_hessian"
    options = _options.check(name, {
        "strategy": strategy, "chunk_size": chunk_size,
        "unconnected_gradients": unconnected_gradients, "independent": independent,
        "max_bytes": max_bytes}, compile=compile, jit_compile=jit_compile)
    if distribute is not None:
        return _distributed(batch_hessian, target, source, distribute, gather, compile,
                            jit_compile, _sample_split, options)
    if run := dispatch.compiled(batch_hessian, target, (source,), options, compile,
                                jit_compile):
        return run()
    problem = st.make_problem(name, target, source, argument="source")
    (flat_source,) = _single_source(name, problem)
    backend = dispatch.backend_for(problem, order=2)
    compute = (_jacobians.batch_hessian_block if independent
               else _jacobians.exact_batch_hessian)
    with st.after(st.check_batch(name, backend.target, flat_source, per_sample_scalar=True)):
        return compute(backend, flat_source, _options.how(options))


@_library_code
def jvp(f, primals: Nest, tangents: Nest, *, compile: bool = True, jit_compile: bool = False):
    """Forward mode: the outputs of `f` and their directional derivative along `tangents`.

    Shape: `(f(primals), J·tangents)`, the second with the structure and shapes of the
    outputs. One forward pass in eager mode (`tf.autodiff.ForwardAccumulator`); the
    double-VJP trick in graphs.

    Args:
      f: a callable `f(primals) -> tensor or nest of tensors`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them (a tensor given
        twice is one primal: its tangents add up).
      tangents: the direction, with the structure, shapes and dtypes of `primals`.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.

    Returns:
      `(outputs, output_tangents)`; an output that does not depend on the primals gets a
      zero tangent.

    Raises:
      TypeError: when `f` is not callable or `tangents` does not match `primals`.
      compat_grads.DerivativeError: where a graph cannot differentiate the gradient (the
        double-VJP trick), e.g. through a TF1 `tf.while_loop`.

    Example:
      >>> import compat_grads as cg
      >>> out, tangent = cg.jvp(lambda x: x ** 2, tf.constant([1.0, 3.0]),
      ...                       tf.constant([1.0, 0.0]))
      >>> tangent.numpy()
      array([2., 0.], dtype=float32)

    Migrating from TF1:
      Before: `g = tf.gradients(y, x, grad_ys=u); tf.gradients(g, u, grad_ys=v)` with a
      placeholder u. After: `cg.jvp(f, x, v)`.
    """
    name = "jvp"
    _options.check(name, {}, compile=compile, jit_compile=jit_compile)
    if run := dispatch.compiled(jvp, f, (primals, tangents), {}, compile, jit_compile):
        return run()
    problem = st.make_problem(name, _callable(name, f), primals, nested_target=True,
                              argument="primals")
    flat_tangents = st.match_sources(name, "tangents", problem, tangents)
    outputs, products = dispatch.backend_for(problem).linearize(flat_tangents)
    flat_outputs = tf.nest.flatten(outputs)
    return outputs, tf.nest.pack_sequence_as(outputs, st.zeros_for_none(products, flat_outputs))


@_library_code
def vjp(f, primals: Nest, cotangents: Nest, *, compile: bool = True,
        jit_compile: bool = False):
    """Reverse mode: the outputs of `f` and the cotangents pulled back to the primals.

    Shape: `(f(primals), cotangentsᵀ·J)`, the second with the structure and shapes of
    `primals`, in their dtypes.

    Args:
      f: a callable `f(primals) -> tensor or nest of tensors`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them.
      cotangents: with the structure and shapes of the outputs of `f`.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.

    Returns:
      `(outputs, gradients)`; a primal the outputs do not depend on gets zeros.

    Raises:
      TypeError / ValueError: when `f` is not callable or `cotangents` does not match.

    Example:
      >>> import compat_grads as cg
      >>> out, grads = cg.vjp(lambda x: x ** 2, tf.constant([1.0, 3.0]),
      ...                     tf.constant([1.0, 1.0]))
      >>> grads.numpy()
      array([2., 6.], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(y, x, grad_ys=u)`. After: `cg.vjp(f, x, u)` in every mode.
    """
    name = "vjp"
    _options.check(name, {}, compile=compile, jit_compile=jit_compile)
    if run := dispatch.compiled(vjp, f, (primals, cotangents), {}, compile, jit_compile):
        return run()
    problem = st.make_problem(name, _callable(name, f), primals, nested_target=True,
                              argument="primals")
    backend = dispatch.backend_for(problem)
    flat_cotangents = st.match_outputs(name, backend.outputs, cotangents)
    grads = backend.vjp_fn()(flat_cotangents)
    return backend.outputs, problem.pack(st.zeros_for_none(grads, problem.flat))


@_library_code
def hvp(f, primals: Nest, vector: Nest, *, compile: bool = True,
        jit_compile: bool = False) -> Nest:
    """Hessian-vector product `H·v` of a scalar `f`, without building the Hessian.

    Shape: the structure and shapes of `primals`; `(H·v)[i] = sum_j H[i][j]·v[j]`. Computed
    as the JVP of the gradient along `vector` (forward-over-reverse): the cost of about two
    gradients, whatever the number of parameters.

    Args:
      f: a callable `f(primals) -> scalar`.
      primals: a tensor, a variable, or a list / tuple / dict nest of them.
      vector: with the structure, shapes and dtypes of `primals`.
      compile: in eager mode, run a callable target through a tf.function traced once per
        callable, options and input shapes, and cached (False: run it eagerly).
      jit_compile: compile that tf.function with XLA.

    Returns:
      `H·v` in the structure of `primals` (zeros for primals that do not reach the gradient).

    Raises:
      ValueError: when `f` does not return a scalar.
      TypeError: when `vector` does not match `primals`.

    Example:
      >>> import compat_grads as cg
      >>> x = tf.constant([1.0, 2.0])
      >>> cg.hvp(lambda x: x[0] ** 2 * x[1], x, tf.constant([1.0, 0.0])).numpy()
      array([4., 2.], dtype=float32)

    Migrating from TF1:
      Before: `tf.gradients(tf.reduce_sum(tf.gradients(f, x)[0] * v), x)`. After:
      `cg.hvp(f, x, v)`.
    """
    name = "hvp"
    _options.check(name, {}, compile=compile, jit_compile=jit_compile)
    if run := dispatch.compiled(hvp, f, (primals, vector), {}, compile, jit_compile):
        return run()
    problem = st.make_problem(name, _callable(name, f), primals, argument="primals")
    flat_vector = st.match_sources(name, "vector", problem, vector)
    backend = dispatch.backend_for(problem, order=2)
    gradient = backend.vjp_backend(
        lambda targets: [tf.ones_like(st.check_scalar(name, targets[0]))])
    _, products = gradient.linearize(flat_vector)
    return problem.pack(st.zeros_for_none(products, problem.flat))


def _distributed(public, target, sources, distribute, gather, compile, jit_compile, split,
                 options):
    """`distribute=` after the options were checked: computed in pieces by `split(name,
    target, sources, options)`, each piece with the same options (`max_bytes` then bounds
    each piece); in eager mode through a tf.function cached per callable and options, as
    `compile=True` caches the undistributed call."""
    name = public.__name__
    options = dict(options)
    tape = options.pop("tape", None)
    _distribute.check(name, distribute, gather, compile, tape)
    if "independent" in options:
        _independent_for(name, options.pop("independent"))
    if not callable(target) and dispatch.execution_mode() == dispatch.EAGER:
        raise st.eager_tensor_error(name)
    everything = dict(options, distribute=_distribute.hashable(distribute), gather=gather)
    if run := dispatch.compiled(public, target, (sources,), everything, compile, jit_compile):
        return run()
    return _distribute.run(name, distribute, gather, split(name, target, sources, options),
                           jit_compile)


def _sample_split(name, target, source, options):
    """batch_jacobian and batch_hessian on a share of the samples."""
    _callable_for(name, target, "each replica computes the outputs of its own samples")
    public = batch_jacobian if name == "batch_jacobian" else batch_hessian
    source = source if tf.is_tensor(source) else tf.convert_to_tensor(source)
    return _distribute.sample_split(name, lambda share: public(target, share, **options),
                                    source, _models.batch_size(name, source))


def _per_example_distributed(model, weights, x, y, *, loss_fn, distribute, gather,
                             compile=False, **options):
    name = "per_example_gradients"

    def share(batch):
        return per_example_gradients(loss_fn, model, *batch, weights=weights, **options)

    split = _distribute.sample_split(name, share, (x, y), _models.batch_size(name, x))
    return _distribute.run(name, distribute, gather, split)


def _independent_for(name, independent):
    if independent is not True:
        raise ValueError(message(
            name, f"distribute= splits the examples between the pieces, which needs "
            f"independent=True, but got independent={independent!r} (coupled examples "
            "need the whole batch in one piece)", "Drop distribute=, or pass "
            "independent=True when examples do not interact."))


def _callable_for(name, target, why):
    if not callable(target):
        raise TypeError(message(
            name, f"distribute= needs the target as a callable ({why}), but got "
            f"{describe(target)}", "Pass f itself (e.g. lambda x: model(x)) instead of "
            "its output."))


def _callable(name, f):
    if not callable(f) or tf.is_tensor(f):
        raise TypeError(message(
            name, f"f must be a callable f(primals), but got {describe(f)}",
            "Wrap the computation in a function of the primals (a tensor cannot be run "
            "again at other inputs)."))
    return f
