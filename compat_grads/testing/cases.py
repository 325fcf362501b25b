"""The shared case table: functions built from TF ops, their inputs and an independent oracle.

Each case says how to build the target from the sources (and constants) with TensorFlow ops,
and how to compute the same function in numpy (for float64 central differences) or its
Jacobian analytically. Both test suites and `compat-grads check` run this table.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable

import numpy as np

from compat_grads._src.core.tf import tf


@dataclasses.dataclass(frozen=True)
class Case:
    """One row of the matrix.

    Attributes:
      name: unique id.
      build: `(sources, consts) -> target`, TF ops; `sources` has the structure of
        `make_sources()`, `consts` is a dict of tensors.
      make_sources: `rng -> nest of float64 arrays` (rounded to `dtype` later).
      make_consts: `rng -> dict of float64 arrays`.
      numpy_fn: `(sources, consts) -> array`, the same function in numpy (float64), for the
        central-difference oracle. Unused when `jacobian` is given.
      jacobian: `(sources, consts) -> [block per flat source]`, the analytic Jacobian.
      dtype: dtype of sources and constants.
      batched: samples are independent along axis 0, so `batch_jacobian` applies.
      dynamic_batch: graph routes feed sources with an unknown first dimension.
      unconnected: flat indices of sources the target does not depend on.
      variables: sources are `tf.Variable`s instead of tensors.
      may_fall_back: pfor may fail on it, so a `VectorizationWarning` (and the while_loop
        fallback) is expected; in every other case such a warning is a failure.
      unsupported: routes where a tape-taking function must fail with a clear
        `compat_grads.ModeError`.
      fails: (item id glob, route glob, exception name) triples: calls that must fail with
        that compat_grads exception and a clear message (TensorFlow limitations).
      target_dtype: the target's dtype when it is not `dtype`.
      second_order: run hessian (and batch_hessian / hvp where they apply) on it.
      coupled: samples interact, so batch functions run with `independent=False` only.
      hessian: `(sources, consts) -> [[block per flat source] per flat source]`, the
        analytic Hessian; otherwise second-order central differences of `numpy_fn`.
      repeats: (j, k) pairs, k < j: flat source j is flat source k itself, one tensor in
        the nest twice; every occurrence gets the total derivative (the oracle moves both).
      note: what the case guards against.
    """

    name: str
    build: Callable
    make_sources: Callable
    make_consts: Callable = lambda rng: {}
    numpy_fn: Callable | None = None
    jacobian: Callable | None = None
    dtype: str = "float32"
    batched: bool = False
    dynamic_batch: bool = False
    unconnected: tuple = ()
    variables: bool = False
    may_fall_back: bool = False
    unsupported: tuple = ()
    fails: tuple = ()
    target_dtype: str | None = None
    second_order: bool = False
    coupled: bool = False
    hessian: Callable | None = None
    repeats: tuple = ()
    note: str = ""

    def inputs(self):
        """(sources, consts) as float64 arrays holding values exactly representable in dtype."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        rounded = lambda a: round_to(np.asarray(a, np.float64), self.dtype)  # noqa: E731
        sources = self.repeated(tf.nest.map_structure(rounded, self.make_sources(rng)))
        return sources, {k: rounded(v) for k, v in self.make_consts(rng).items()}

    def repeated(self, sources):
        """`sources` with each repeated leaf replaced by the leaf it repeats (`repeats`)."""
        if not self.repeats:
            return sources
        flat = tf.nest.flatten(sources)
        for j, k in self.repeats:
            flat[j] = flat[k]
        return tf.nest.pack_sequence_as(sources, flat)

    def group(self, k) -> tuple:
        """The flat indices of the sources that are flat source k itself (k included)."""
        first = dict(self.repeats).get(k, k)
        return (first, *sorted(j for j, i in self.repeats if i == first))

    def __str__(self):
        return self.name

    def direction_tensors(self):
        """`directions()` as tensors: tangents in the sources' dtype, the cotangent in the
        target's."""
        tangents, cotangent = self.directions()
        return (tf.nest.map_structure(lambda t: tf.constant(t, self.dtype), tangents),
                tf.constant(cotangent, self.target_dtype or self.dtype))

    def directions(self):
        """(tangents like the sources, a cotangent like the target), fixed per case and
        rounded to the case's dtype: the directions of jvp / hvp and of vjp."""
        sources, consts = self.inputs()
        rng = np.random.default_rng(zlib.crc32(b"directions " + self.name.encode()))
        tangents = tf.nest.map_structure(
            lambda x: round_to(rng.standard_normal(np.shape(x)), self.dtype), sources)
        cotangent = round_to(rng.standard_normal(np.shape(self.numpy_fn(sources, consts))),
                             self.dtype)
        return tangents, cotangent

    @property
    def scalar_target(self) -> bool:
        sources, consts = self.inputs()
        return np.size(self.numpy_fn(sources, consts)) == 1

    @property
    def square(self) -> bool:
        """One source, and the target shaped like it: a divergence applies."""
        sources, consts = self.inputs()
        flat = tf.nest.flatten(sources)
        return len(flat) == 1 and not tf.nest.is_nested(sources) and \
            np.shape(self.numpy_fn(sources, consts)) == np.shape(flat[0])

    @property
    def per_sample_scalar(self) -> bool:
        sources, consts = self.inputs()
        shape = np.shape(self.numpy_fn(sources, consts))
        return self.batched and (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1))


def round_to(array, dtype: str):
    """float64 array of the values `array` takes once cast to `dtype`."""
    return np.asarray(array, tf.as_dtype(dtype).as_numpy_dtype).astype(np.float64)


def _normal(*shape):
    return lambda rng: rng.standard_normal(shape)


# ----------------------------------------------------------------------------- builders


def _mlp(x, c):
    return tf.tanh(tf.matmul(tf.tanh(tf.matmul(x, c["w1"]) + c["b1"]), c["w2"]))


def _mlp_np(x, c):
    return np.tanh(np.tanh(x @ c["w1"] + c["b1"]) @ c["w2"])


def _mlp_consts(rng):
    return {"w1": rng.standard_normal((3, 5)) / 2, "b1": rng.standard_normal(5) / 2,
            "w2": rng.standard_normal((5, 2)) / 2}


def _mlp_case(name, dtype="float32", **kw):
    return Case(name, _mlp, _normal(4, 3), _mlp_consts, numpy_fn=_mlp_np, dtype=dtype,
                batched=True, **kw)


def _softmax_np(x, c):
    z = x @ c["w"]
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _conv_np(x, f):
    """VALID, stride 1, NHWC input, HWIO filter."""
    kh, kw = f.shape[:2]
    out_h, out_w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], out_h, out_w, f.shape[3]))
    for i in range(out_h):
        for j in range(out_w):
            out[:, i, j, :] = np.einsum("bhwc,hwco->bo", x[:, i:i + kh, j:j + kw, :], f)
    return out


def _conv(x, f):
    return tf.nn.conv2d(x, f, strides=1, padding="VALID")


def _matmul_column_jacobian(x, c):
    a = c["a"]
    return [a.reshape(a.shape[0], 1, a.shape[1], 1)]


def _scalar_stack(x, c):
    return tf.stack([x ** 2, x ** 3])


def _embedding(table, c):
    return tf.nn.embedding_lookup(table, tf.constant([[1, 3], [3, 5]])) * c["w"]


def _nest_dict(s, c):
    return tf.tanh(tf.linalg.matvec(s["b"], s["a"][:2])) * s["a"][2]


def _nest_dict_np(s, c):
    return np.tanh(s["b"] @ s["a"][:2]) * s["a"][2]


def _piecewise(x, c):
    return tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.sin(x) * x, lambda: x ** 2)


def _piecewise_np(x, c):
    return np.sin(x) * x if x.sum() > 0 else x ** 2


def _pinn(xt, c):
    """A PINN's u(x, t): a tanh MLP of the point (x, t), one output per point."""
    hidden = tf.tanh(tf.matmul(xt, c["w1"]) + c["b1"])
    return tf.matmul(tf.tanh(tf.matmul(hidden, c["w2"]) + c["b2"]), c["w3"])


def _pinn_np(xt, c):
    hidden = np.tanh(xt @ c["w1"] + c["b1"])
    return np.tanh(hidden @ c["w2"] + c["b2"]) @ c["w3"]


def _pinn_consts(rng):
    return {"w1": rng.standard_normal((2, 6)) / 2, "b1": rng.standard_normal(6) / 2,
            "w2": rng.standard_normal((6, 6)) / 2, "b2": rng.standard_normal(6) / 2,
            "w3": rng.standard_normal((6, 1)) / 2}


def _vector_field(x, c):
    """An MLP vector field R^3 -> R^3 per sample: what a divergence differentiates."""
    return tf.matmul(tf.tanh(tf.matmul(x, c["w1"]) + c["b1"]), c["w2"]) * x[:, :1]


def _vector_field_np(x, c):
    return (np.tanh(x @ c["w1"] + c["b1"]) @ c["w2"]) * x[:, :1]


def _vector_field_consts(rng):
    return {"w1": rng.standard_normal((3, 5)) / 2, "b1": rng.standard_normal(5) / 2,
            "w2": rng.standard_normal((5, 3)) / 2}


def _cross_terms(x, c):
    return x[0] * x[1] + tf.sin(x[0]) * x[1] ** 2 + x[2] ** 3 * x[0]


def _cross_terms_np(x, c):
    return x[0] * x[1] + np.sin(x[0]) * x[1] ** 2 + x[2] ** 3 * x[0]


CASES = (
    Case("matmul_column", lambda x, c: tf.matmul(c["a"], x), _normal(50, 1),
         lambda rng: {"a": rng.standard_normal((100, 50))}, jacobian=_matmul_column_jacobian,
         numpy_fn=lambda x, c: c["a"] @ x,
         note="y = A @ x, x (50,1), A (100,50): J (100,1,50,1), with no extra axis (the "
              "Python loop of tf.gradients adds one); the loop strategy runs over indices "
              "(map_fn over the values of y fails) and the graph does not grow with the 100 rows"),
    Case("scalar_stack", _scalar_stack, lambda rng: np.float64(rng.uniform(1, 2)),
         jacobian=lambda x, c: [np.array([2 * x, 3 * x ** 2])],
         numpy_fn=lambda x, c: np.array([x ** 2, x ** 3]), second_order=True,
         note="scalar x, y = stack([x**2, x**3]): dy/dx has shape (2,)"),
    _mlp_case("mlp_tanh", second_order=True,
              note="nonlinear, batched: tanh MLP on a (4,3) batch"),
    _mlp_case("mlp_tanh_float64", "float64", second_order=True),
    _mlp_case("mlp_tanh_float16", "float16"),
    _mlp_case("mlp_tanh_bfloat16", "bfloat16"),
    _mlp_case("mlp_dynamic_batch", dynamic_batch=True, second_order=True,
              note="unknown batch size in graphs (TF's private batch_jacobian crashes on "
                   "it in a v1 Graph inside TF2)"),
    _mlp_case("mlp_variables", variables=True, note="sources are tf.Variables"),
    Case("mlp_weights", lambda w, c: _mlp(c["x"], {"w1": w[0], "b1": c["b1"], "w2": w[1]}),
         lambda rng: [rng.standard_normal((3, 5)) / 2, rng.standard_normal((5, 2)) / 2],
         lambda rng: {"x": rng.standard_normal((4, 3)), "b1": rng.standard_normal(5) / 2},
         numpy_fn=lambda w, c: _mlp_np(c["x"], {"w1": w[0], "b1": c["b1"], "w2": w[1]}),
         note="Jacobian with respect to a list of weights: one block per weight"),
    Case("softmax", lambda x, c: tf.nn.softmax(tf.matmul(x, c["w"])), _normal(3, 4),
         lambda rng: {"w": rng.standard_normal((4, 4))}, numpy_fn=_softmax_np, batched=True),
    Case("conv2d_input", lambda x, c: _conv(x, c["f"]), _normal(2, 4, 4, 2),
         lambda rng: {"f": rng.standard_normal((3, 3, 2, 3)) / 3},
         numpy_fn=lambda x, c: _conv_np(x, c["f"]), batched=True),
    Case("conv2d_filter", lambda f, c: _conv(c["x"], f), lambda rng: rng.standard_normal(
        (2, 2, 2, 3)) / 3, lambda rng: {"x": rng.standard_normal((2, 3, 3, 2))},
         numpy_fn=lambda f, c: _conv_np(c["x"], f),
         note="pfor has no converter for Conv2DBackpropFilter and falls back to a loop"),
    Case("nest_dict", _nest_dict, lambda rng: {"a": rng.standard_normal(3),
                                               "b": rng.standard_normal((2, 2))},
         numpy_fn=_nest_dict_np, second_order=True,
         note="dict of sources: results keep the dict; Hessian cross terms between them"),
    Case("nest_tuple", lambda s, c: s[0] * tf.sin(s[1]),
         lambda rng: (rng.standard_normal(3), rng.standard_normal(3)),
         numpy_fn=lambda s, c: s[0] * np.sin(s[1])),
    Case("unconnected", lambda s, c: s[0] ** 2, lambda rng: [rng.standard_normal(3),
                                                            rng.standard_normal(2)],
         numpy_fn=lambda s, c: s[0] ** 2, unconnected=(1,), second_order=True,
         note="the second source is not used: None or zeros, never a wrong shape"),
    Case("batch_unconnected", lambda x, c: tf.stop_gradient(x) * 2.0, _normal(3, 2),
         numpy_fn=lambda x, c: 2 * x, batched=True, unconnected=(0,),
         note="batch_jacobian of an unconnected source: None or zeros as asked (TF's own "
              "parallel_for batch_jacobian returns zeros regardless)"),
    Case("gather", lambda x, c: tf.tanh(tf.gather(x, [0, 2, 2, 4])), _normal(5, 3),
         numpy_fn=lambda x, c: np.tanh(x[[0, 2, 2, 4]]), second_order=True,
         note="gather gives IndexedSlices gradients; repeated indices must add up"),
    Case("embedding", _embedding, _normal(6, 4), lambda rng: {"w": rng.standard_normal(4)},
         numpy_fn=lambda t, c: t[np.array([[1, 3], [3, 5]])] * c["w"]),
    Case("mixed_f32_source_f64_target", lambda x, c: tf.cast(x, tf.float64) ** 3,
         _normal(3), numpy_fn=lambda x, c: x ** 3, second_order=True, target_dtype="float64",
         note="target dtype differs from the source dtype"),
    Case("mixed_f64_source_f32_target", lambda x, c: tf.cast(tf.sin(x), tf.float32),
         _normal(3), numpy_fn=lambda x, c: np.sin(x), dtype="float64", target_dtype="float32"),
    Case("batch_rank1_target", lambda x, c: tf.reduce_sum(x ** 2 * c["w"], axis=1),
         _normal(4, 3), lambda rng: {"w": rng.standard_normal(3)},
         numpy_fn=lambda x, c: (x ** 2 * c["w"]).sum(axis=1), batched=True, second_order=True,
         note="per-sample scalars of shape (b,): GradientTape.batch_jacobian rejects them"),
    Case("scalar_target", lambda x, c: tf.reduce_sum(tf.tanh(x)), _normal(3, 2),
         numpy_fn=lambda x, c: np.tanh(x).sum(), second_order=True),
    Case("identity_target", lambda x, c: tf.identity(x), _normal(2, 3),
         jacobian=lambda x, c: [np.eye(6).reshape(2, 3, 2, 3)],
         numpy_fn=lambda x, c: x),
    Case("repeated_sources", lambda s, c: s[0] * s[1] * tf.sin(s[2]),
         lambda rng: [rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)],
         numpy_fn=lambda s, c: s[0] * s[1] * np.sin(s[2]), repeats=((1, 0),),
         second_order=True,
         note="[x, x, z]: one tensor twice in the sources; every occurrence gets the total "
              "derivative, as tf.gradients gives it, on every route (the compiled eager route "
              "passes x in once). Every derivative adds at most two terms: three or more may "
              "be added in another order by another runtime (see docs/traps.rst)"),
    Case("repeated_variables", lambda s, c: tf.reduce_sum(s[0] ** 2 * s[1]),
         lambda rng: [rng.standard_normal(3), rng.standard_normal(3)],
         numpy_fn=lambda s, c: np.sum(s[0] ** 2 * s[1]), repeats=((1, 0),), variables=True,
         second_order=True, note="[v, v] with a scalar target: Hessian and hvp of one variable "
                                 "given twice"),
    Case("piecewise_cond", _piecewise, lambda rng: rng.uniform(0.5, 1.5, 3),
         numpy_fn=_piecewise_np, may_fall_back=True, unsupported=("tf1.tape",),
         second_order=True, fails=(
             # Forward mode through a cond's gradient: TF1 cannot take the double VJP's
             # gradient inside a while_loop, ForwardAccumulator cannot push through cond_v2.
             ("*-hessian-forward*", "tf1.*", "DerivativeError"),
             ("*-hessian-forward*", "eager.uncompiled", "DerivativeError")),
         note="tf.cond in the target: pfor fails through a v1 cond in TF1 graphs (at run "
              "time) and in forward mode through a v2 cond, so the while_loop takes over; "
              "GradientTape cannot differentiate a v1 cond at all"),
    Case("pinn_u_xt", _pinn, lambda rng: rng.uniform(-1, 1, (5, 2)), _pinn_consts,
         numpy_fn=_pinn_np, batched=True, second_order=True,
         note="a PINN's u(x, t), [b, 1] per point: u_xx and u_tt are the per-sample "
              "Hessian diagonal, their sum the Laplacian"),
    Case("vector_field", _vector_field, _normal(4, 3), _vector_field_consts,
         numpy_fn=_vector_field_np, batched=True,
         note="an MLP vector field R^3 -> R^3: the divergence of a normalizing flow"),
    Case("cross_terms", _cross_terms, _normal(3), numpy_fn=_cross_terms_np, second_order=True,
         note="mixed partials: the Hessian diagonal differs from its row sums (what "
              "tf.gradients(tf.gradients(y, x), x) gives)"),
)


XY_SAMPLES = np.array([[-6.0, -3.0], [1.0, 8.0], [2.0, 9.0], [4.0, 12.0]])


def _three_x2y_plus_y2(xy, c):
    return 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2


def _coupled(x, c):
    """Per-sample scalars that also depend on the batch mean (like BatchNorm in training)."""
    mean = tf.reduce_mean(x, axis=0)
    return tf.reduce_sum(x ** 2 * mean + tf.sin(x), axis=1)


def _coupled_np(x, c):
    return (x ** 2 * x.mean(axis=0) + np.sin(x)).sum(axis=1)


def _loss(w, c):
    return tf.reduce_sum(_mlp(c["x"], {"w1": w[0], "b1": c["b1"], "w2": w[1]}) ** 2)


def _loss_np(w, c):
    return (_mlp_np(c["x"], {"w1": w[0], "b1": c["b1"], "w2": w[1]}) ** 2).sum()


SECOND_ORDER = (
    Case("per_sample_hessian_3x2y_plus_y2", _three_x2y_plus_y2, lambda rng: XY_SAMPLES,
         numpy_fn=_three_x2y_plus_y2, hessian=lambda xy, c: [[_three_x2y_plus_y2_hessian(xy)]],
         batched=True, second_order=True,
         note="f = 3x²y + y² per sample of xy (4, 2): per-sample Hessians "
              "[[6y, 6x], [6x, 2]], shape (4, 2, 2)"),
    Case("per_sample_hessian_3x2y_plus_y2_dynamic", _three_x2y_plus_y2, lambda rng: XY_SAMPLES,
         numpy_fn=_three_x2y_plus_y2, hessian=lambda xy, c: [[_three_x2y_plus_y2_hessian(xy)]],
         batched=True, dynamic_batch=True, second_order=True,
         note="the same with the batch size unknown while building"),
    Case("quadratic_form", lambda x, c: tf.tensordot(x, tf.linalg.matvec(c["a"], x), 1),
         _normal(5), lambda rng: {"a": rng.standard_normal((5, 5))},
         numpy_fn=lambda x, c: x @ c["a"] @ x,
         hessian=lambda x, c: [[c["a"] + c["a"].T]], second_order=True,
         note="xᵀAx: the Hessian is A + Aᵀ, exactly"),
    Case("mlp_scalar_loss", lambda x, c: tf.reduce_sum(_mlp(x, c) ** 2), _normal(4, 3),
         _mlp_consts, numpy_fn=lambda x, c: (_mlp_np(x, c) ** 2).sum(), second_order=True),
    Case("mlp_weights_loss", _loss, lambda rng: [rng.standard_normal((3, 5)) / 2,
                                                rng.standard_normal((5, 2)) / 2],
         lambda rng: {"x": rng.standard_normal((4, 3)), "b1": rng.standard_normal(5) / 2},
         numpy_fn=_loss_np, second_order=True,
         note="Hessian of a loss with respect to two weight matrices: four blocks"),
    Case("elementwise_variables", lambda x, c: x ** 3 * c["w"] + tf.sin(x), _normal(2, 3),
         lambda rng: {"w": rng.standard_normal((2, 3))}, variables=True, batched=True,
         numpy_fn=lambda x, c: x ** 3 * c["w"] + np.sin(x), second_order=True,
         note="a non-scalar target of a variable: its Hessian's rows run in a loop whose "
              "body must differentiate with respect to the variable the target reads, not a "
              "copy of its own (which gave None in tf.function and the compiled eager "
              "route under strategy='loop' and chunk_size)"),
    Case("coupled_samples", _coupled, _normal(3, 2), numpy_fn=_coupled_np, batched=True,
         coupled=True, second_order=True,
         note="samples interact through the batch mean: only independent=False is right"),
)


def _three_x2y_plus_y2_hessian(xy):
    x, y = xy[:, 0], xy[:, 1]
    per_sample = np.stack([np.array([[6 * b, 6 * a], [6 * a, 2.0]]) for a, b in zip(x, y)])
    full = np.zeros((4, 4, 2, 4, 2))
    for s in range(4):
        full[s, s, :, s, :] = per_sample[s]
    return full


CASES = CASES + SECOND_ORDER


def get(name: str) -> Case:
    return next(case for case in CASES if case.name == name)
