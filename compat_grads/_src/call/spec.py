"""What one public function computes, as the call path (`compat_grads._src.call.run`) reads
it: a plain record the modules that compose the math (`compat_grads._src.call.specs`,
`compat_grads._src.call.specs_traces`) fill in, below the call path that runs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Spec:
    """What one public function computes, for the call path.

    Attributes:
      name: the public name (error messages, the compile cache's key and warnings).
      compute: `compute(name, target, args, options)` -> the result, without `distribute=`
        and without the compile cache (it runs inside the compiled function, and in each
        piece of a split).
      split: `split(name, compute, target, args, options)` -> the `_distribute.Split` of a
        call with `distribute=`, where `compute(target, args, options)` is the computation of
        each piece (that of `pieces`); None when the function has no `distribute=`.
      pieces: the spec whose computation the pieces run (None: this one).
      prepare: `prepare(name, target, args)` -> `(target, args)`, run after the options are
        checked (None: the arguments as given).
      needs_callable: why `distribute=` needs a callable target, checked before anything
        else of `distribute=` ("": not checked here).
      tensor_target: whether the target may be a tensor (an eager one needs its tape).
      bind_sources: whether the compiled function captures every source (a model's weights)
        instead of passing it.
      value: how `has_aux` / `return_value` get the value: "capture" (the callable target's
        own output, `compat_grads._src.call.value.Capture`), "outputs" (the result holds the outputs
        already: only `has_aux`, whose aux comes last) or "own" (the computation returns
        `(value, derivative)` itself when `return_value`).
      samples: `distribute=` splits the samples: each piece carries its value and flat
        matrix, joined along the batch axis.
      flatten: `flatten(name, derivative, y, sources)` -> the `flat=True` matrix.
      argument: the public name of the target argument ("f" for jvp, vjp and hvp).
    """

    name: str
    compute: Callable
    split: Callable | None = None
    pieces: Spec | None = None
    prepare: Callable | None = None
    needs_callable: str = ""
    tensor_target: bool = True
    bind_sources: bool = False
    value: str = "capture"
    samples: bool = False
    flatten: Callable | None = None
    argument: str = "target"
