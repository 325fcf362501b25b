"""Recurrent layers (LSTM, GRU, SimpleRNN, and those inside Bidirectional): their kernels
are read inside a loop, where no rule sees their time steps' inputs and output gradients.
While the forward pass of a private step is built, Keras' own `unroll=True` turns the loop
into one matmul per time step, each a use the dense rules read: the per-example gradient of
a kernel is then the sum over time steps, and its norm the Gram form over them. The layers
are restored as they were as soon as the forward pass is built."""

from __future__ import annotations

import contextlib


def recurrent_layers(model) -> list:
    """The Keras recurrent layers that run a loop in `model` (itself included), or in the
    Keras models a function calls (`lambda x: model(x, training=True)`: the models its
    closure, its bound object and the globals it names hold)."""
    found = []
    for keras_object in _keras_objects(model):
        found += [layer for layer in keras_object._flatten_layers(include_self=True)
                  if hasattr(layer, "cell") and getattr(layer, "unroll", True) is False
                  and layer not in found]
    return found


def _keras_objects(model) -> list:
    if hasattr(model, "_flatten_layers"):
        return [model]
    code = getattr(model, "__code__", None)
    if code is None:
        bound = getattr(model, "__self__", None)
        return [bound] if hasattr(bound, "_flatten_layers") else []
    cells = [cell.cell_contents for cell in (getattr(model, "__closure__", None) or ())
             if _filled(cell)]
    named = [getattr(model, "__globals__", {}).get(name) for name in code.co_names]
    return [each for each in cells + named if hasattr(each, "_flatten_layers")]


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def unrolled(layers):
    """`layers` (from `recurrent_layers`) unrolled meanwhile: Keras 3 reads `unroll`,
    Keras 2 also its choice of the fused kernel, made when the layer was created."""
    saved = [(layer, layer.unroll, layer.__dict__.get("_could_use_gpu_kernel"))
             for layer in layers]
    try:
        for layer in layers:
            layer.unroll = True
            if "_could_use_gpu_kernel" in layer.__dict__:
                layer._could_use_gpu_kernel = False
        yield
    finally:
        for layer, unroll, fused in saved:
            layer.unroll = unroll
            if fused is not None:
                layer._could_use_gpu_kernel = fused
