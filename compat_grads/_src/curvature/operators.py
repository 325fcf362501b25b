"""The curvature operators: the Hessian of a scalar function, the generalized Gauss-Newton
and the Fisher of a model's loss, each a `tf.linalg.LinearOperator` over the flat
concatenation of the parameters (`compat_grads._src.curvature.flat`), each product computed
from the backends' VJPs and JVPs, never from a matrix:

- Hessian: `H v`, the composition `hvp` uses (the gradient's backend, then its symmetric
  linearization: forward-over-reverse on a tape, reverse-over-reverse in a graph);
- GGN: `Σ_s J_sᵀ H_s J_s v`, a JVP of the model's outputs along v, the loss's Hessian in
  output space (`compat_grads._src.curvature.losses` where known, else a Hessian-vector
  product of the loss in the predictions), then a VJP;
- Fisher: `Σ_s g_s (g_sᵀ v)`, a JVP of the per-example losses along v (the `[b]` numbers
  g_s·v), then their VJP: the per-example gradients are never formed.

Why this layer sits just above `backends/` (tests_tf2/test_house.py's LAYERS): the backends
already decide, in one place, how a product is taken in each mode (tapes and accumulators in
eager code, `tf.gradients` in graphs and `tf.function`), refuse a Keras 3 model in a TF1
graph, unwrap Keras 3 variables, handle captured and duplicated sources and densify
`IndexedSlices`; the operators reuse all of that rather than ask the mode themselves. The
call path (`call/`) is not used: it compiles and caches whole public calls, while an
operator's products are built inside the estimators' loops and the caller's graphs.
"""

from __future__ import annotations

from compat_grads._src.backends import select as _select
from compat_grads._src.core import models as _models
from compat_grads._src.core import replicas as _replicas
from compat_grads._src.core import structure as st
from compat_grads._src.core.errors import describe, message
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import checks, probes
from compat_grads._src.curvature import flat as _flat
from compat_grads._src.curvature import losses as _losses

FISHER_KINDS = ("empirical", "true")


# -- the public functions' bodies --------------------------------------------------------


def hessian_operator(f, params, data, distribute=None):
    function = "hessian_operator"
    _check_callable(function, "f", f, "f(params) or f(params, *batch)")
    data = _hessian_data(function, data)
    _check_distribute(function, distribute, data)
    flat = st.flatten_sources(function, params, convert=True, argument="params")
    params = tf.nest.pack_sequence_as(params, flat)
    layout = _flat.layout(function, "params", flat, st.leaf_paths(params, "params"))

    def product(batch, salt, vector):
        return hessian_vector(function, _bound(f, batch), params, vector)
    return _flat.CurvatureOperator(_flat.Products(function, layout, product, data,
                                                  distribute))


def ggn_operator(loss_fn, model, x, y, weights, distribute=None):
    function = "ggn_operator"
    weights, layout, data = _model_arguments(function, loss_fn, model, (x, y), weights)
    _check_distribute(function, distribute, data)
    loss = (loss_fn, _losses.recognized(loss_fn))

    def product(batch, salt, vector):
        return _gauss_newton(function, loss, model, weights, batch, vector)
    return _flat.CurvatureOperator(_flat.Products(function, layout, product, data,
                                                  distribute))


def fisher_operator(loss_fn, model, x, y, weights, kind, seed, distribute=None):
    function = "fisher_operator"
    kind = checks.choice(function, "kind", kind, FISHER_KINDS)
    seed = checks.seed(function, seed)
    weights, layout, data = _model_arguments(function, loss_fn, model, (x, y), weights)
    _check_distribute(function, distribute, data)
    if distribute is not None and kind == "true":
        raise ValueError(message(
            function, "kind='true' cannot be split with distribute=: each replica would "
            "draw its share's labels, not the draw of the whole batch that one seed names",
            "Drop distribute= for the true Fisher, or use kind='empirical'."))
    labels = None if kind == "empirical" else _sampler(function, loss_fn, seed)

    def product(batch, salt, vector):
        return _fisher(function, (loss_fn, labels), model, weights, (batch, salt), vector)
    return _flat.CurvatureOperator(_flat.Products(function, layout, product, data,
                                                  distribute))


# -- the products --------------------------------------------------------------------------


def hessian_vector(function, f, params, vector):
    """`H v` of the scalar `f(params)` (one piece per leaf of `params`): `hvp`'s
    composition of the backends' products."""
    problem = st.make_problem(function, f, params, argument="params")
    backend = _select.backend_for(problem, order=2)
    gradient = backend.vjp_backend(lambda targets: [st.ones_of(_scalar(function, targets))])
    _, products = gradient.linearize_symmetric(vector)
    return st.zeros_for_none(products, problem.flat)


def _gauss_newton(function, loss, model, weights, batch, vector):
    """`Σ_s J_sᵀ H_s J_s v` on one batch `(x, y)`: the outputs and `J v` from one forward
    pass, the loss's Hessian in output space, then `Jᵀ (H J v)`."""
    x, y = batch
    _select.check_model_mode(function, model)
    problem = st.make_problem(function, lambda ws: model(x), weights, nested_target=True,
                              argument="weights")
    backend = _select.backend_for(problem)
    with st.after(_models.check_batches(function, x, y)):
        outputs, pushed = backend.linearize(vector)
        flat = tf.nest.flatten(outputs)
        curved = _output_hessian(function, loss, y, outputs, st.zeros_for_none(pushed, flat))
        return st.zeros_for_none(backend.vjp_fn()(curved), problem.flat)


def _output_hessian(function, loss, y, outputs, pushed):
    """The loss's Hessian in the predictions applied to `pushed` (one piece per output
    leaf): the closed form where the loss is known, else a Hessian-vector product of the
    summed per-example losses in the predictions (the examples' blocks are separate, so
    this is each example's H_s on its own part)."""
    loss_fn, known = loss
    if known is not None and _one_output(outputs):
        return [known.hessian(y, outputs, pushed[0])]

    def summed(predictions):
        return tf.reduce_sum(_losses_at(function, loss_fn, predictions, y))
    return hessian_vector(function, summed, outputs, pushed)


def _fisher(function, loss, model, weights, batch, vector):
    """`Σ_s g_s (g_sᵀ v)` on one batch: the per-example losses' JVP along v, then their VJP
    with those `[b]` numbers as cotangents. `loss` is `(loss_fn, labels)`: labels None for
    the given ones, else `labels(predictions, y, salt)` draws them."""
    (x, y), salt = batch
    loss_fn, labels = loss
    _select.check_model_mode(function, model)

    def losses(ws):
        predictions = model(x)
        drawn = y if labels is None else labels(predictions, y, salt)
        return _losses_at(function, loss_fn, predictions, drawn)

    problem = st.make_problem(function, losses, weights, argument="weights")
    backend = _select.backend_for(problem)
    with st.after(_models.check_batches(function, x, y)):
        target, (pushed,) = backend.linearize(vector)
        pushed = tf.zeros_like(target) if pushed is None else pushed
        return st.zeros_for_none(backend.vjp_fn()([pushed]), problem.flat)


def _sampler(function, loss_fn, seed):
    """`labels(predictions, y, salt)` drawn from the predictive distribution of the loss
    (the true Fisher's), or a ValueError naming loss_fn when the loss is not known."""
    known = _losses.recognized(loss_fn)
    if known is None:
        raise ValueError(message(
            function, f"kind='true' samples labels from the model's predictive distribution, "
            f"which is known for {_losses.DESCRIBED}, but loss_fn is {_described(loss_fn)}",
            "Pass one of those losses, or kind='empirical' (the Fisher of the given labels)."))

    def labels(predictions, y, salt):
        if not _one_output(predictions):
            raise ValueError(message(
                function, "kind='true' needs the model to return one tensor of predictions "
                f"[b, ..., k], but it returned {describe(predictions)}",
                "Return the logits (or the regression outputs) as one tensor of rank 2 or "
                "more, or use kind='empirical'."))
        return known.sample(tf.stop_gradient(predictions), y, seed, probes.label_salt(salt))
    return labels


# -- arguments -----------------------------------------------------------------------------


def _model_arguments(function, loss_fn, model, batch, weights):
    """(weights as the leaves' nest, their layout, the data: one `(x, y)` batch or a
    Dataset of them), checked."""
    _models.check_callables(function, loss_fn, model)
    _select.check_model_mode(function, model)
    weights = _models.default_weights(function, model, weights)
    flat = st.flatten_sources(function, weights, argument="weights")
    layout = _flat.layout(function, "weights", flat, st.leaf_paths(weights, "weights"))
    return tf.nest.pack_sequence_as(weights, flat), layout, _model_data(function, *batch)


def _model_data(function, x, y):
    """`(x, y)` as tensors, or x itself when it is a Dataset of `(x, y)` batches (then y
    must be None, as in Keras' `fit`)."""
    if isinstance(x, tf.data.Dataset):
        if y is not None:
            raise ValueError(message(
                function, f"x is a tf.data.Dataset of (inputs, labels) batches, so y must be "
                f"None, but got {describe(y)}", "Drop y: the labels come from the dataset."))
        spec = x.element_spec
        if not isinstance(spec, tuple) or len(spec) != 2:
            raise TypeError(message(
                function, "x is a tf.data.Dataset, whose elements must be (inputs, labels) "
                f"pairs, but they are {spec}", "Map it to pairs: dataset.map(lambda *e: "
                "(inputs, labels))."))
        return x
    if y is None:
        raise TypeError(message(
            function, "y must be the batch of labels, but got None (None is only for x "
            "given as a tf.data.Dataset of (inputs, labels) batches)",
            "Pass the labels as y, or x as a Dataset of (inputs, labels)."))
    return (_models.as_tensors(function, "x", x), _models.as_tensors(function, "y", y))


def _hessian_data(function, data):
    """None, one batch (a tuple of tensors, converted) or a Dataset of batches."""
    if data is None or isinstance(data, tf.data.Dataset):
        return data
    if not isinstance(data, tuple) or not data:
        raise TypeError(message(
            function, f"data must be a non-empty tuple of tensors (one batch: f(params, "
            f"*data)) or a tf.data.Dataset of batches, but got {describe(data)}",
            "Pass data=(x, y) for one batch, or data=tf.data.Dataset.from_tensor_slices("
            "(x, y)).batch(b) for the sum over its batches."))
    return tuple(_models.as_tensors(function, "data", part) for part in data)


def _check_distribute(function, distribute, data):
    """`distribute` checked (`compat_grads._src.core.replicas`): it splits one batch's
    examples, so the data must be one batch (a tuple), not None nor a Dataset."""
    if distribute is None:
        return
    _replicas.check(function, distribute)
    if not isinstance(data, tuple):
        raise ValueError(message(
            function, f"distribute= splits the examples of one batch over the replicas, "
            f"but the data is {describe(data)}", "Pass one batch (data=(x, y), or x and y "
            "as tensors); a tf.data.Dataset's batches are summed on one device."))


def _bound(f, batch):
    """`f(params)` alone, or with the batch's parts as its further arguments: a tuple is
    unpacked (`f(params, x, y)`), anything else passed as one (`f(params, batch)`)."""
    if batch is None:
        return f
    parts = batch if isinstance(batch, tuple) else (batch,)
    return lambda params: f(params, *parts)


def _losses_at(function, loss_fn, predictions, labels):
    """The `[b]` per-example losses of `predictions` against `labels`, as
    `per_example_gradients` reads them."""
    return _models.per_example_losses(function, loss_fn, lambda _: predictions, None,
                                      labels, None)


def _one_output(outputs) -> bool:
    """Whether the model returned one tensor of rank 2 or more: what the closed forms need
    (predictions or logits along the last axis)."""
    return tf.is_tensor(outputs) and (outputs.shape.rank or 0) >= 2


def _scalar(function, targets):
    """The one scalar f returned (checked where its shape is known)."""
    if len(targets) != 1 or targets[0].shape.num_elements() not in (1, None):
        shown = targets[0].shape if len(targets) == 1 else f"{len(targets)} tensors"
        raise ValueError(message(
            function, f"f must return a scalar, but it returned {shown}",
            "Reduce it to one number (tf.reduce_sum or tf.reduce_mean of the loss): the "
            "operator is the Hessian of a scalar."))
    return targets[0]


def _check_callable(function, name, value, form):
    if not callable(value) or tf.is_tensor(value):
        raise TypeError(message(
            function, f"{name} must be callable as {form}, but got {describe(value)}",
            "Pass a function that computes the scalar from the parameters."))


def _described(loss_fn) -> str:
    return getattr(loss_fn, "__name__", None) or type(loss_fn).__name__
