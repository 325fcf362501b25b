"""The specs of the diagonal and trace functions (hessian_diagonal, laplacian, divergence and
their per-sample forms): what each computes, as `compat_grads._src.call.specs` holds the others'."""

from __future__ import annotations

from compat_grads._src.backends import select as _select
from compat_grads._src.call import distribute as _distribute
from compat_grads._src.call.spec import Spec
from compat_grads._src.core import structure as st
from compat_grads._src.core.checks import run_time_check
from compat_grads._src.core.errors import message
from compat_grads._src.core.tf import tf
from compat_grads._src.traces import traces as _traces

# -- checks --------------------------------------------------------------------------------


def _scalar(name, target, instead):
    """ValueError for a target known not to be a scalar; the run-time check when its size
    is only known then (None when it is known to be one)."""
    fix = (f"Reduce it to the scalar you want the second derivatives of (e.g. with "
           f"tf.reduce_sum), or use {instead} for one scalar per sample.")
    elements = target.shape.num_elements()
    if elements not in (1, None):
        raise ValueError(message(
            name, f"target must be a scalar, but it has shape {target.shape}", fix))
    if elements is None:
        return run_time_check(name, "target must be a scalar", fix,
                                 tf.debugging.assert_equal, tf.size(target), 1)
    return None


def _square(name, target, source, batched):
    if not target.shape.is_compatible_with(source.shape):
        per = "each sample's " if batched else ""
        raise ValueError(message(
            name, f"the Jacobian must be square ({per}target shaped like the source), but "
            f"the target has shape {target.shape} and the source {source.shape}",
            "Differentiate a vector field of its input (y.shape == x.shape); for another "
            "Jacobian use " + ("batch_jacobian" if batched else "stacked_jacobian") + "."))
    if target.shape.is_fully_defined() and source.shape.is_fully_defined():
        return None
    return run_time_check(
        name, "the target must have the source's shape (a square Jacobian)",
        "Differentiate a vector field of its input (y.shape == x.shape).",
        tf.debugging.assert_equal, tf.shape(target), tf.shape(source))


def _one_dtype(name, flat):
    dtypes = sorted({st.dtype_of(x).name for x in flat})
    if len(dtypes) > 1:
        raise TypeError(message(
            name, f"every source must have one dtype to sum their traces, but got {dtypes}",
            "Cast the sources to one dtype, or call it once per source."))


def _distribute_exact(name, options):
    if options.estimator.method != "exact" and options.distribute is not None:
        raise ValueError(message(
            name, "distribute= splits the samples, so each piece would draw its own probes "
            f"(the estimate would depend on the split), but got method="
            f"{options.estimator.method!r}", "Drop distribute=, or use method='exact'."))


def _exact_only(name, options):
    if options.estimator.method != "exact":
        raise ValueError(message(
            name, "independent=False computes each sample's exact values from the whole "
            "batch, which an estimate cannot (its probes would mix the samples), but got "
            f"method={options.estimator.method!r}", "Pass method='exact' with "
            "independent=False, or independent=True when samples do not interact."))


# -- results -------------------------------------------------------------------------------


def _filled(value, like, options):
    """None where unconnected, or zeros shaped like `like` with unconnected_gradients="zero"."""
    if value is None and options.how.unconnected == "zero":
        return tf.zeros_like(like)
    return value


def _total(values, options, like):
    """The sum of the sources' traces (None when none is connected and "none")."""
    kept = [v for v in values if v is not None]
    return _filled(tf.add_n(kept) if kept else None, like, options)


def _result(options, estimates, errors=None):
    return (estimates, errors) if options.estimator.return_std else estimates


# -- the computations ----------------------------------------------------------------------


def _diagonal(name, target, args, options, summed=False):
    (sources,) = args
    problem = st.make_problem(name, target, sources)
    backend = _select.backend_for(problem, order=2)
    flat = problem.flat
    guard = _scalar(name, backend.target,
                    "batch_laplacian" if summed else "batch_hessian_diagonal")
    if summed:
        _one_dtype(name, flat)
    return _waiting(guard, _diagonal_of_scalar(problem, backend, options, summed,
                                               propagate=guard is None))


def _waiting(guard, result):
    """`result`, each tensor of it made after the run-time check `guard` has passed. (A
    control-dependency block around the computation is not enough: TensorFlow gives the
    dependency to the block's constants only, and the computation may run first.)"""
    if guard is None:
        return result

    def wait(t):
        with tf.control_dependencies([guard]):
            return tf.identity(t)
    return tf.nest.map_structure(wait, result)


def _diagonal_of_scalar(problem, backend, options, summed, propagate, batched=False):
    """The diagonals of a scalar target, or of each sample's (`batched`), or their sum over
    the sources' elements (a Laplacian: one per sample when batched); `propagate`: the
    forward Laplacian may be tried (its target is known to be one scalar per sample)."""
    flat = problem.flat
    like = None
    if summed:
        shape = tf.shape(flat[0])[:1] if batched else []
        like = tf.zeros(shape, st.dtype_of(flat[0]))
    if options.estimator.method == "exact":
        found = _traces.diagonals(backend, flat, options.how, batched=batched, summed=summed,
                                  propagate=propagate)
        if summed:
            return _total(found, options, like)
        return problem.pack([_filled(d, x, options) for d, x in zip(found, flat)])
    found = _traces.estimated_diagonals(backend, flat, options.how, options.estimator,
                                        batched=batched, summed=summed)
    if summed:
        ((mean, error),) = found
        return _result(options, _filled(mean, like, options), _filled(error, like, options))
    return _result(options, *[problem.pack([_filled(pair[i], x, options)
                                            for pair, x in zip(found, flat)])
                              for i in (0, 1)])


def _laplacian(name, target, args, options):
    return _diagonal(name, target, args, options, summed=True)


def _batch_diagonal(name, target, args, options, summed=False):
    """Per-sample diagonals of a source, or of each source of a nest (coordinates held
    apart, as a PINN's x, y and t); a Laplacian sums them over every source."""
    _distribute_exact(name, options)
    if not options.independent:
        _exact_only(name, options)
    (sources,) = args
    problem = st.make_problem(name, target, sources, argument="source")
    flat = problem.flat
    if summed:
        _one_dtype(name, flat)
    backend = _select.backend_for(problem, order=2)
    checks = [c for c in (st.check_batch(name, backend.target, x, per_sample_scalar=True)
                          for x in flat) if c is not None]
    with st.after(tf.group(checks) if checks else None):
        if options.independent:
            return _diagonal_of_scalar(problem, backend, options, summed, True, batched=True)
        found = [_coupled_diagonal(backend, x, options.how, summed) for x in flat]
        if summed:
            return _total(found, options, tf.zeros(tf.shape(flat[0])[:1], st.dtype_of(
                flat[0])))
        return problem.pack([_filled(d, x, options) for d, x in zip(found, flat)])


def _batch_laplacian(name, target, args, options):
    return _batch_diagonal(name, target, args, options, summed=True)


def _coupled_diagonal(backend, x, how, summed):
    """independent=False: d² y[s] / d x[s, j]² from the full derivative of each sample's
    own gradient (exact when samples interact, at b·n products)."""
    if how.strategy == "auto" and backend.second_order_outer != "forward":
        how = how.using("reverse")
    diagonal = _traces.coupled_diagonal(backend, x, how)
    return tf.reduce_sum(diagonal, axis=list(range(1, x.shape.rank))) if summed else diagonal


def _divergence(name, target, args, options, batched=False):
    _distribute_exact(name, options)
    (source,) = args
    problem = st.make_problem(name, target, source, options.tape, argument="source")
    (x,) = st.single_source(name, problem)
    backend = _select.backend_for(problem)
    checks = [_square(name, backend.target, x, batched)]
    if batched:
        checks.append(st.check_batch(name, backend.target, x))
    like = tf.zeros(tf.shape(x)[:1] if batched else [], st.dtype_of(x))
    with st.after(tf.group([c for c in checks if c is not None]) if any(
            c is not None for c in checks) else None):
        if options.estimator.method == "exact":
            return _filled(_traces.traces_of_jacobian(backend, x, options.how, batched), like,
                           options)
        mean, error = _traces.estimated_trace_of_jacobian(backend, x, options.how,
                                                          options.estimator, batched)
        return _result(options, _filled(mean, like, options), _filled(error, like, options))


def _batch_divergence(name, target, args, options):
    return _divergence(name, target, args, options, batched=True)


# -- the specs -----------------------------------------------------------------------------

HESSIAN_DIAGONAL = Spec("hessian_diagonal", _diagonal)
LAPLACIAN = Spec("laplacian", _laplacian)
BATCH_HESSIAN_DIAGONAL = Spec("batch_hessian_diagonal", _batch_diagonal,
                              split=_distribute.split_samples, samples=True)
BATCH_LAPLACIAN = Spec("batch_laplacian", _batch_laplacian, split=_distribute.split_samples,
                       samples=True)
DIVERGENCE = Spec("divergence", _divergence, argument="target")
BATCH_DIVERGENCE = Spec("batch_divergence", _batch_divergence, split=_distribute.split_samples,
                        samples=True)
