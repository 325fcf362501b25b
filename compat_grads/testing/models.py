"""Keras model cases: small `tf_keras` models of each layer kind, run on every route and
checked against an oracle that never calls compat_grads.

The oracle of per-example gradients is a plain Python loop over examples, each gradient
taken on its own (`GradientTape.gradient`; for coupled examples, the gradient of example s's
loss in the full batch), on a float64 copy of the model. The oracle of input Jacobians is
float64 central differences of that copy. Both run in the current process: eagerly in TF2,
in a Session in TF1 (GradientTape records graphs too).

The routes are the modes of `compat_grads.testing.modes` (the whole model per mode, so a
route is its mode's name) plus "eager.uncompiled"; each runs under `routes.captured`, as the
matrix's routes do, and gives a `routes.Result`. TF1 results come from
`compat_grads.testing.process` with `--models` (v2 behaviour disabled).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import itertools
import zlib
from collections.abc import Callable

import numpy as np

from compat_grads._src.core.tf import keras2, tf
from compat_grads.testing import modes, process
from compat_grads.testing import private_training as _private
from compat_grads.testing.matrix import cover, select
from compat_grads.testing.oracle import example_differences
from compat_grads.testing.routes import Result, captured
from compat_grads.testing.tolerances import MODEL_TOLERANCE as TOLERANCE
from compat_grads.testing.tolerances import pin_runtime_for_bitwise, scaled_error

BATCH = 4
UNCOMPILED = modes.route(modes.EAGER, "uncompiled")
ROUTES = (*modes.MODES, UNCOMPILED)
TF2_ROUTES = ROUTES[1:]
FUNCTIONS = (*_private.FUNCTIONS, "per_example_gradients", "weights_jacobian",
             "batch_jacobian")
"""The functions of the model items, the costliest first (`quick` takes the cheap ones)."""


def keras():
    """Keras 2, the Keras that runs in TF1 graphs (`tf.keras` up to TensorFlow 2.15, the
    `tf_keras` package from 2.16)."""
    return keras2()


@dataclasses.dataclass(frozen=True)
class ModelCase:
    """One small model. `layers(init)` builds its layers, taking every weight from `init`
    (deterministic, the same in every process and mode)."""

    name: str
    layers: Callable
    input_shape: tuple
    classes: int = 3
    vocabulary: int | None = None  # integer inputs (token ids) when set
    training: bool = False
    coupled: bool = False  # examples interact (BatchNorm in training mode)
    falls_back: tuple = ()  # "function@route" globs where pfor may fall back (with a warning)
    fails: tuple = ()  # "function@route" globs that must raise compat_grads.DerivativeError
    strategies: tuple = ({},)

    def __str__(self):
        return self.name


def _initializer(case_name):
    """Keras initializers that draw from a generator seeded by the case and weight shape."""
    counter = [0]

    def make(scale=0.5):
        counter[0] += 1
        seed = zlib.crc32(f"{case_name}/{counter[0]}".encode())

        def init(shape, dtype=None, **_):
            values = np.random.default_rng(seed).uniform(-scale, scale, shape)
            return tf.constant(values, dtype or tf.float32)
        return init
    return make


def _positive(shape, dtype=None, **_):
    return tf.constant(np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape),
                       dtype or tf.float32)


def _dense(init, dtype, units, **kw):
    return keras().layers.Dense(units, kernel_initializer=init(), bias_initializer=init(),
                                dtype=dtype, **kw)


def _mlp(init, dtype):
    return [_dense(init, dtype, 6, activation="tanh"), _dense(init, dtype, 3)]


def _cnn(init, dtype):
    layers = keras().layers
    return [layers.Conv2D(2, 3, activation="tanh", kernel_initializer=init(),
                          bias_initializer=init(), dtype=dtype),
            layers.Flatten(dtype=dtype), _dense(init, dtype, 3)]


def _conv_layers(*specs):
    """Convolutions `(layer name, filters or None, options)` then a dense layer: each kind
    whose per-example filter gradients compat_grads vectorizes itself
    (`compat_grads._src.stacking.pfor_converters`)."""
    def layers(init, dtype):
        built = []
        for name, filters, options in specs:
            kernels = ({"depthwise_initializer": init(), "pointwise_initializer": init()}
                       if "Separable" in name else {"depthwise_initializer": init()}
                       if "Depthwise" in name else {"kernel_initializer": init()})
            args = (() if filters is None else (filters,)) + (3,)
            built.append(getattr(keras().layers, name)(
                *args, activation="tanh", bias_initializer=init(), dtype=dtype, **kernels,
                **options))
        return [*built, keras().layers.Flatten(dtype=dtype), _dense(init, dtype, 3)]
    return layers


def _embedding(init, dtype):
    layers = keras().layers
    return [layers.Embedding(7, 4, input_length=3, embeddings_initializer=init(), dtype=dtype),
            layers.Flatten(dtype=dtype), _dense(init, dtype, 3)]


def _batch_norm(init, dtype):
    layers = keras().layers
    norm = layers.BatchNormalization(beta_initializer=init(), gamma_initializer=_positive,
                                     moving_mean_initializer=init(),
                                     moving_variance_initializer=_positive, dtype=dtype)
    return [_dense(init, dtype, 6), norm, layers.Activation("tanh", dtype=dtype),
            _dense(init, dtype, 3)]


def _recurrent(kind):
    def layers(init, dtype):
        cell = getattr(keras().layers, kind)(3, kernel_initializer=init(),
                                             recurrent_initializer=init(),
                                             bias_initializer=init(), dtype=dtype)
        return [cell, _dense(init, dtype, 3)]
    return layers


def _dropout(init, dtype):
    return [_dense(init, dtype, 6, activation="tanh"),
            keras().layers.Dropout(0.5, dtype=dtype), _dense(init, dtype, 3)]


# pfor cannot vectorize the gradient of a while_v2 loop per example (TensorList ops), and
# in TF1 graphs tf_keras's RNN loop is a v1 while_loop, which pfor must not see at all;
# nor can tf.gradients differentiate a v1 while_loop built outside the loop that stacks the
# rows, so there each row runs the model again (with a warning).
RNN_FALLBACKS = ("per_example_gradients@*", "*@tf1")

CASES = (
    ModelCase("mlp", _mlp, (5,), strategies=({}, {"strategy": "loop"}, {"chunk_size": 3})),
    ModelCase("cnn", _cnn, (5, 5, 1), strategies=({}, {"chunk_size": 3})),
    ModelCase("cnn_strided_dilated", _conv_layers(
        ("Conv2D", 2, {"strides": 2, "padding": "same"}),
        ("Conv2D", 2, {"dilation_rate": 2, "padding": "same"})), (6, 5, 2)),
    ModelCase("conv1d", _conv_layers(("Conv1D", 3, {"strides": 2}), ("Conv1D", 2, {})),
              (9, 2)),
    ModelCase("depthwise_separable", _conv_layers(
        ("DepthwiseConv2D", None, {"depth_multiplier": 2}),
        ("SeparableConv2D", 2, {"padding": "same"})), (5, 5, 2)),
    ModelCase("conv_transpose", _conv_layers(("Conv2DTranspose", 2, {"strides": 2})),
              (3, 3, 2), falls_back=_private.FALLBACKS),
    ModelCase("conv3d", _conv_layers(("Conv3D", 2, {"strides": (2, 1, 1), "padding": "same"}),
                                     ("Conv3D", 2, {})), (6, 4, 4, 2)),
    ModelCase("embedding", _embedding, (3,), vocabulary=7),
    ModelCase("batchnorm_inference", _batch_norm, (5,)),
    ModelCase("batchnorm_training", _batch_norm, (5,), training=True, coupled=True),
    ModelCase("lstm", _recurrent("LSTM"), (4, 2), falls_back=RNN_FALLBACKS),
    ModelCase("gru", _recurrent("GRU"), (4, 2), falls_back=RNN_FALLBACKS),
    ModelCase("dropout_inference", _dropout, (5,)),
)


@dataclasses.dataclass(frozen=True)
class ModelItem:
    case: ModelCase
    function: str
    options: tuple = ()

    unconnected = "none"  # as a matrix Item, for the reports of `compat-grads check`

    @property
    def strategy(self) -> str | None:
        return dict(self.options).get("strategy")

    @property
    def id(self) -> str:
        extra = "-".join(f"{k}{v}" for k, v in self.options)
        return "-".join(p for p in (self.case.name, self.function, extra) if p)

    def __str__(self):
        return self.id


def items(pattern: str | None = None) -> list:
    """Every model item, or those whose id matches the glob / substring `pattern`."""
    out = []
    for case in CASES:
        for options in case.strategies:
            out.append(ModelItem(case, "per_example_gradients", tuple(sorted(options.items()))))
        out += [ModelItem(case, f) for f in ("weights_jacobian", *_private.FUNCTIONS)]
        if case.vocabulary is None:
            out.append(ModelItem(case, "batch_jacobian"))
    return select(out, pattern)


QUICK_RULE = "every model, every function and every option at least once, each on every route"


def quick(selected: list) -> list:
    """The quick model check's items among `selected`: cheapest first (models whose
    per-example gradients vectorize before the recurrent ones that fall back to a loop;
    input Jacobians, then weight Jacobians, then per-example gradients), an item is kept when
    it adds a model, a function or an option (`strategy="loop"`, `chunk_size`) not yet
    covered. See `compat_grads.testing.matrix.quick`."""
    def coverage(item):
        return {("case", item.case.name), ("function", item.function), *item.options}

    def cheapness(item):
        return bool(item.case.falls_back), FUNCTIONS[::-1].index(item.function), item.id
    return cover(selected, coverage, cheapness)


def inputs(case: ModelCase):
    """(x, y) as numpy: a batch of BATCH examples and their integer labels."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    if case.vocabulary is None:
        x = rng.uniform(-1.0, 1.0, (BATCH, *case.input_shape))
    else:  # repeated ids inside an example: their gradient rows must add up
        x = rng.integers(0, case.vocabulary, (BATCH, *case.input_shape))
        x[:, 1] = x[:, 0]
    return x, rng.integers(0, case.classes, BATCH)


def build_model(case: ModelCase, dtype=tf.float32):
    """The case's model, built (weights created) for inputs of the case's shape."""
    # The Input's dtype keeps Keras from casting float64 inputs to float32 on the way in.
    first = keras().Input(case.input_shape, dtype=_input_dtype(case, dtype))
    return keras().Sequential([first, *case.layers(_initializer(case.name), dtype.name)])


def call(case, model):
    """The model as the function compat_grads differentiates (training mode if the case
    asks for it)."""
    return lambda x: model(x, training=case.training)


def loss_fn(y_true, logits):
    return keras().losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)


def _per_example_losses(case, model, x, y):
    return loss_fn(y, call(case, model)(x))


def invoke(item: ModelItem, model, x, y, compile=True):
    """The compat_grads call of `item`; returns a flat list of tensors (None kept)."""
    import compat_grads as cg

    case, options = item.case, dict(item.options)
    if item.function == "per_example_gradients":
        return cg.per_example_gradients(loss_fn, call(case, model), x, y,
                                        weights=model.trainable_weights,
                                        independent=not case.coupled, compile=compile,
                                        **options)
    if item.function in _private.FUNCTIONS:
        return _private.invoke(item.function, loss_fn, call(case, model), x, y,
                               model.trainable_weights, not case.coupled, compile)
    if item.function == "weights_jacobian":
        return cg.stacked_jacobian(lambda ws: _per_example_losses(case, model, x, y),
                                   model.trainable_weights, compile=compile, **options)
    return [cg.batch_jacobian(call(case, model), x, independent=not case.coupled,
                              compile=compile, **options)]


def _input_dtype(case, dtype):
    return tf.int32 if case.vocabulary is not None else dtype


def run(item: ModelItem, route: str) -> Result:
    """Runs `item` on `route` in this process (exceptions and our warnings recorded). An
    older spelling of the mode (`modes.ALIASES`) names the same route."""
    runner = {modes.TF1: _run_graph, modes.V1_GRAPH: _run_graph, modes.FUNCTION: _run_function,
              modes.EAGER: _run_eager, UNCOMPILED: _run_uncompiled}[modes.canonical(route)]
    return captured(lambda: Result(values=runner(item)))


def _in_session(build):
    """Runs `build() -> (flat fetches, {placeholder: value})` in a new graph and Session,
    after initializing variables; None fetches stay None."""
    with tf.Graph().as_default():
        fetches, feeds = build()
        return modes.session_values(fetches, feeds)


def _run_graph(item):
    case = item.case
    x, y = inputs(case)

    def build():
        model = build_model(case)
        xs = tf.compat.v1.placeholder(_input_dtype(case, tf.float32), [None, *x.shape[1:]])
        ys = tf.compat.v1.placeholder(tf.int64, [None])
        return tf.nest.flatten(invoke(item, model, xs, ys)), {xs: x, ys: y}
    return _in_session(build)


def _run_function(item):
    case = item.case
    x, y = inputs(case)
    model = build_model(case)
    spec = tf.TensorSpec([None, *x.shape[1:]], _input_dtype(case, tf.float32))
    compute = tf.function(lambda xs, ys: tf.nest.flatten(invoke(item, model, xs, ys)),
                          input_signature=[spec, tf.TensorSpec([None], tf.int64)],
                          autograph=False)
    return _numpy(compute(tf.constant(x, spec.dtype), tf.constant(y)))


def _run_eager(item, compile=True):
    case = item.case
    x, y = inputs(case)
    model = build_model(case)
    xs = tf.constant(x, _input_dtype(case, tf.float32))
    return _numpy(tf.nest.flatten(invoke(item, model, xs, tf.constant(y), compile=compile)))


def _run_uncompiled(item):
    return _run_eager(item, compile=False)


def _numpy(flat):
    return modes.to_numpy(tf.nest.flatten(flat))


def oracle(item: ModelItem) -> list:
    """The item's expected values in float64, without compat_grads (see the module doc)."""
    case = item.case
    x, y = inputs(case)
    if item.function == "batch_jacobian":
        return [_central_differences(case, x)]

    def build():
        model = build_model(case, tf.float64)
        xs = tf.constant(x, _input_dtype(case, tf.float64))
        return _loop_of_gradients(case, model, xs, tf.constant(y)), None
    grads = _numpy(build()[0]) if tf.executing_eagerly() else _in_session(build)
    return _private.expected(item.function, grads)


def _loop_of_gradients(case, model, x, y):
    """Per-example gradients one example at a time: `[b] + w.shape` per weight."""
    rows = []
    for s in range(BATCH):
        with tf.GradientTape() as tape:
            if case.coupled:  # example s's loss inside the whole batch
                loss = _per_example_losses(case, model, x, y)[s]
            else:
                loss = tf.reduce_sum(_per_example_losses(case, model, x[s:s + 1], y[s:s + 1]))
        # GradientTape cannot differentiate TF1's v1 while_loop (RNNs): tf.gradients there.
        gradients = (tape.gradient(loss, model.trainable_weights) if tf.executing_eagerly()
                     else tf.compat.v1.gradients(loss, model.trainable_weights))
        rows.append([tf.convert_to_tensor(g) for g in gradients])
    return [tf.stack(column) for column in zip(*rows)]


def _central_differences(case, x):
    """d logits[s] / d x[s] per example, shape `[b] + logits.shape[1:] + x.shape[1:]`."""
    return example_differences(_evaluator(case), x, case.coupled)


def _evaluator(case):
    """`x -> logits` of the float64 model, as numpy."""
    if tf.executing_eagerly():
        model = build_model(case, tf.float64)
        return lambda x: call(case, model)(tf.constant(x)).numpy()
    graph = tf.Graph()
    with graph.as_default():
        model = build_model(case, tf.float64)
        xs = tf.compat.v1.placeholder(tf.float64, [None, *case.input_shape])
        out = call(case, model)(xs)
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    return lambda x: session.run(out, {xs: x})


def problems(item: ModelItem, route: str, outcome: Result, expected: list) -> list:
    """What is wrong with `outcome` (empty when it matches `expected` within tolerance)."""
    if _matches(item, route, item.case.fails):
        if outcome.error is None or not outcome.error.startswith("DerivativeError: "
                                                                 "compat_grads."):
            return [f"{item.id} on {route} must raise DerivativeError, got {outcome.error}"]
        return []
    if outcome.error is not None:
        return [f"{item.id} on {route} failed: {outcome.error}"]
    found = []
    if outcome.warnings and not _matches(item, route, item.case.falls_back):
        found.append(f"{item.id} on {route} warned: {outcome.warnings}")
    if len(outcome.values) != len(expected):
        return [*found, f"{item.id} on {route}: {len(outcome.values)} blocks, expected "
                        f"{len(expected)}"]
    for k, (value, want) in enumerate(zip(outcome.values, expected)):
        if value is None or np.shape(value) != np.shape(want):
            found.append(f"{item.id} on {route}: block {k} has shape {np.shape(value)}, "
                         f"expected {np.shape(want)}")
        elif (error := scaled_error(value, want)) > TOLERANCE["float32"]:
            found.append(f"{item.id} on {route}: block {k} is off by {error:.3g} (scaled)")
    return found


def check_item(item: ModelItem, tf1: Result | None, routes=TF2_ROUTES):
    """Runs `item` on `routes` (every TF2 route), with `tf1` from the TF1 process (None: no
    TF1 result), against the oracle and pairwise. Returns (problems, outcomes by route,
    largest scaled error against the oracle, largest scaled difference between routes)."""
    expected, outcomes = evaluate(item, routes)
    return judge(item, expected, outcomes if tf1 is None else {**outcomes, modes.TF1: tf1})


def evaluate(item: ModelItem, routes=TF2_ROUTES):
    """(the oracle's values, {route: Result} on `routes`: every TF2 route), computed
    here."""
    return oracle(item), {route: run(item, route) for route in routes}


EAGER_WAYS = (modes.EAGER, UNCOMPILED)


def route_plan(selected: list) -> dict:
    """{item id: its TF2 routes} for a suite that runs every mode, not every route: a v1
    Graph, tf.function and one of eager's two ways (compiled, uncompiled), by turns within
    each model, the turn starting one further on each model, so every model and every
    function meets both ways."""
    graphs = tuple(r for r in TF2_ROUTES if r not in EAGER_WAYS)
    plan, earlier = {}, {}  # model -> (its position among the models, its items so far)
    for item in selected:
        position, count = earlier.get(item.case.name, (len(earlier), 0))
        earlier[item.case.name] = (position, count + 1)
        plan[item.id] = (*graphs, EAGER_WAYS[(position + count) % len(EAGER_WAYS)])
    return plan


def judge(item: ModelItem, expected: list, outcomes: dict):
    """Checks `outcomes` ({route: Result}) against `expected` and each other: see
    `check_item`."""
    found = [p for route, outcome in outcomes.items()
             for p in problems(item, route, outcome, expected)]
    working = [o.values for o in outcomes.values() if o.error is None]
    oracle_error = max((scaled_error(v, w) for values in working
                        for v, w in zip(values, expected) if v is not None), default=0.0)
    difference = 0.0
    for first, second in itertools.combinations(working, 2):
        difference = max([difference, *(scaled_error(a, b) for a, b in zip(first, second)
                                        if a is not None and b is not None)])
    if difference > TOLERANCE["float32"]:
        found.append(f"{item.id}: routes differ by {difference:.3g} (scaled)")
    return found, outcomes, oracle_error, difference


def model_work(tf2=False):
    """What a worker process runs (`process.WorkerProcess`'s `work`): ({item id: item},
    item -> its TF1 route's Result, or with `tf2` -> `evaluate(item)`), the runtime pinned
    as for bitwise checks first."""
    pin_runtime_for_bitwise()
    return {item.id: item for item in items()}, (
        evaluate if tf2 else functools.partial(run, route=modes.TF1))


WORKER_LABEL = "Keras model items"


def run_tf1_process(item_ids=None, timeout: int = 900) -> dict:
    """{item id: Result} of the TF1 route for the items `item_ids` (every item by default),
    run in a new process with v2 behaviour off."""
    ids = [item.id for item in items()] if item_ids is None else list(item_ids)
    return process.run_tf1_process(ids, model_work, WORKER_LABEL, timeout)


def _matches(item, route, patterns) -> bool:
    return any(fnmatch.fnmatch(f"{item.function}@{route}", p) for p in patterns)
