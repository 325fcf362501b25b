"""The docstring paragraphs several public functions share, written once.

A public docstring names a shared paragraph by a line of its own, `{compile}`, at the
indentation the paragraph takes; `fill` replaces it when the module is imported, so `help()`,
the doctests and the API reference all read the full text.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

from compat_grads._src.core import tf as _tf
from compat_grads._src.core.tf import tf

FACE = "compat_grads.api"
"""The module users import the public functions from: `help()`, pickling and the API
reference name each function there."""
P = ParamSpec("P")
R = TypeVar("R")

WIDTH = 96
"""The longest docstring line, indentation included."""

_ARGUMENT = re.compile(r"[a-z_]+: ")

PARAGRAPHS = {
    "target": "target: the tensor `y` (graph mode and `tf.function`; in eager mode together "
              "with the `tape` that recorded it), or a callable `f(sources) -> y` (every "
              "mode).",
    "tape": "tape: the `tf.GradientTape` that recorded an eager tensor target.",
    "unconnected_gradients": 'unconnected_gradients: "none" or "zero", as in '
                             "`stacked_jacobian`.",
    "chunk_size": 'chunk_size: "auto" (the default: every row, or column, at once when the '
                  "result and the rows in flight fit `memory_budget`, else the largest chunk "
                  "that does, chosen when the graph is built; in eager mode a call that runs "
                  "out of memory all the same is retried with half the chunk, with a "
                  "warning), an int (at most that many rows in flight at once: the same "
                  "chunks on every machine) or None (every row at once).",
    "memory_budget": "memory_budget: what `chunk_size=\"auto\"` may use: bytes, a share in "
                     "(0, 1] of the memory free when the graph is built, or None (the "
                     "default: half of it). See the Memory page and `memory_plans`.",
    "max_bytes": "max_bytes: the most memory, in bytes, the result and the rows in flight at "
                 "once may take (default 16 GiB); a larger Jacobian raises ValueError at "
                 "once, before anything is built or run. Sizes known only at run time are not "
                 "counted; None: no limit.",
    "compile": "compile: in eager mode, run a callable target through a tf.function traced "
               "once per callable, options and input shapes, and cached (False: run it "
               "eagerly).",
    "jit_compile": "jit_compile: compile that tf.function with XLA (where XLA cannot, an "
                   "`XlaWarning` and the call runs without XLA).",
    "devices": "Or a list of device names (the TF1 way: the pieces are placed with "
               "`tf.device` in one graph). `chunk_size` applies within each piece; see the "
               '"Several devices and workers" page.',
    "has_aux": "has_aux: the callable target returns a pair `(y, aux)`: `y` is differentiated, "
               "`aux` (any nest of tensors) is returned as it is, never differentiated, and "
               "the result is `(derivative, aux)`. The callable runs no extra time for it. A "
               "tensor target raises TypeError. With `distribute=` the batch functions join "
               "each replica's aux along the batch axis (each leaf needs it first).",
    "has_aux_transform": "has_aux: `f` returns a pair `(outputs, aux)`: `aux` (any nest of "
                         "tensors) is not differentiated and comes last in the result.",
    "return_value": "return_value: return `(y, derivative)`: the target's value, from the "
                    "pass that computes the derivative (a callable is not called again for "
                    "it; a tensor target is returned as it is). With has_aux too: "
                    "`((y, aux), derivative)`.",
    "has_aux_model": "has_aux: the model returns a pair `(predictions, aux)`: `loss_fn` gets "
                     "the predictions, and the aux (any nest of tensors, each with the batch "
                     "axis first) comes from the same passes, one example's per row with "
                     "independent=True: the result is `(gradients, aux)`.",
    "return_value_losses": "return_value: return `(losses, gradients)`: the `[b]` "
                           "per-example losses, from the same forward passes as the "
                           "gradients. With has_aux too: `((losses, aux), gradients)`.",
    "has_aux_forward": "has_aux: the model returns a pair `(predictions, aux)`: `loss_fn` gets "
                       "the predictions, and the aux (any nest of tensors) comes from the "
                       "forward pass the result is read from: the result is `(result, aux)`.",
    "return_value_forward": "return_value: return `(losses, result)`: the `[b]` per-example "
                            "losses of the forward pass the result is read from. With has_aux "
                            "too: `((losses, aux), result)`.",
    "flat_jacobian": "flat: return one matrix `[size(y), sum_k size(x_k)]` instead of the "
                     "blocks: the target flattened, then every source flattened and joined "
                     "in the order of `tf.nest.flatten(sources)` (zeros for an unconnected "
                     "source), as Newton and Gauss-Newton code wants it. Every statically "
                     "known dimension is kept; the sources must share one dtype.",
    "flat_hessian": "flat: return one matrix `[n, n]` for a target of static rank 0 "
                    "(`[size(y), n, n]` otherwise), n = sum_k size(x_k), the sources "
                    "flattened and joined in the order of `tf.nest.flatten(sources)` "
                    "(zeros for unconnected blocks). Every statically known dimension is "
                    "kept; the sources must share one dtype.",
    "flat_batch_jacobian": "flat: return `[b, m, n]`, m and n the per-sample sizes of the "
                           "target and the source, every statically known dimension kept.",
    "flat_batch_hessian": "flat: return `[b, n, n]`, n the per-sample size of the source, "
                          "every statically known dimension kept.",
    "method": 'method: "exact" (the default; never builds the Hessian or Jacobian it is '
              'the diagonal of) or "hutchinson" (an unbiased random estimate from '
              "`num_samples` Rademacher probes: each costs one Hessian- or Jacobian-vector "
              "product, whatever the size of the source).",
    "num_samples": 'num_samples: with method="hutchinson", how many probes to average '
                   "(default 64); the standard error falls as 1/sqrt(num_samples).",
    "seed": "seed: an int: the probes come from a stateless generator, so one seed gives the "
            "same probes, and the same estimate, in every mode and route (TF1 graph "
            "included).",
    "return_std": "return_std: with method=\"hutchinson\", return `(estimate, standard "
                  "error)` (the probes' sample standard deviation over sqrt(num_samples)) "
                  "instead of the estimate.",
    "independent_traces": "independent: whether samples are independent (y[s] depends on "
                          "x[s] only); False computes the exact per-sample values when "
                          "samples interact (BatchNorm in training mode, attention across "
                          "the batch), at b times the cost, with method=\"exact\" only.",
    "gather": "gather: with `distribute`, return one result (True), or the pieces (False): "
              "the strategy's per-replica values, or a list with one result per device.",
}
"""Each paragraph by its placeholder. One that starts with an argument's name and a colon
is that argument: its continuation lines are indented two more columns."""


GROUPS = {
    "memory": ("chunk_size", "max_bytes", "memory_budget"),
    "compiling": ("compile", "jit_compile"),
    "results": ("gather", "has_aux", "return_value"),
}
"""Placeholders for arguments that always come together, in this order: `{memory}` is
`{chunk_size}`, `{max_bytes}` and `{memory_budget}`, one line each."""


def fill(doc: str | None) -> str | None:
    """`doc` with each placeholder line replaced by its paragraph (a group's by each of
    its paragraphs), wrapped at `WIDTH`.

    Raises:
      KeyError: for a placeholder line that names no paragraph (a typo in a docstring).
    """
    if doc is None:  # python -OO strips docstrings
        return None
    lines = []
    for line in doc.splitlines():
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")):
            lines.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        for name in GROUPS.get(text[1:-1], (text[1:-1],)):
            paragraph = PARAGRAPHS[name]
            hanging = indent + "  " if _ARGUMENT.match(paragraph) else indent
            lines += textwrap.wrap(paragraph, WIDTH, initial_indent=indent,
                                   subsequent_indent=hanging)
    return "\n".join(lines)


def public(function: Callable[P, R]) -> Callable[P, R]:
    """A public function: its docstring's shared paragraphs filled in (`fill`), named in
    its face (`FACE`) and hidden from AutoGraph. AutoGraph must not rewrite the library
    when a user's tf.function calls it: its Python control flow is on Python values only,
    and converting it would cost time at every trace. Typed so that a type checker sees the
    signature through the decorator."""
    return cast(Callable[P, R], tf.autograph.experimental.do_not_convert(_faced(function)))


def public_call(function: Callable[P, R]) -> Callable[P, R]:
    """A public function whose body is one call of the call path
    (`compat_grads._src.call.run.run`): as `public`, but without AutoGraph's wrapper, marked
    for AutoGraph to call as it is. The call path hides what it builds from AutoGraph itself,
    and its shortcut (a compiled call like one that ran before) builds nothing: the wrapper's
    context, entered at every call, was a tenth of a small compiled call."""
    return _tf.called_as_is_by_autograph(_faced(function))


def _faced(function):
    """`function` with its docstring's shared paragraphs filled in, named in its face."""
    function.__doc__ = fill(function.__doc__)
    function.__module__ = FACE
    return function
