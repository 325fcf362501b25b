"""Type aliases shared by the public signatures."""

from collections.abc import Callable
from typing import Any, Literal, Union

from compat_grads._src.core.mode import Mode
from compat_grads._src.core.tf import tf

__all__ = ["Budget", "ChunkSize", "FisherKind", "Method", "Mode", "Nest", "NtkMethod", "Seed",
           "Strategy", "Target", "TensorLike", "TraceMethod", "Unconnected", "Which"]

TensorLike = Union[tf.Tensor, tf.Variable]
Nest = Any
"""A tensor, a variable, or a list / tuple / dict nest of them."""
Target = Union[tf.Tensor, Callable[[Nest], tf.Tensor]]
Budget = Union[int, float, None]
"""memory_budget: bytes, a share of the free memory in (0, 1], or None (half of it)."""
ChunkSize = Union[int, Literal["auto"], None]
Method = Literal["exact", "hutchinson"]
Strategy = Literal["auto", "reverse", "forward", "loop"]
Unconnected = Union[Literal["none", "zero"], tf.UnconnectedGradients]
Seed = Union[int, tf.Tensor]
"""An int, or an integer scalar tensor: the key of a stateless generator."""
Which = Literal["LA", "SA", "LM"]
Reorthogonalize = Literal["auto", "full", "local"]
TraceMethod = Literal["hutchinson", "hutch++"]
FisherKind = Literal["empirical", "true"]
NtkMethod = Literal["auto", "jacobian", "products"]
