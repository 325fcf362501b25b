"""The shim's public face: `execution_mode()`, the mode compat_grads reads for every call.

The mode is decided in `compat_grads._src.core.mode` and the backend each mode gets in
`compat_grads._src.backends.select`; this module keeps the names users and earlier
releases import from here.

| mode       | tensor target      | tensor + tape | callable target |
|------------|--------------------|---------------|-----------------|
| "graph"    | graph              | tape          | graph           |
| "function" | graph              | tape          | graph           |
| "eager"    | error (needs tape) | tape          | tape            |
"""

from compat_grads._src.backends.select import backend_for, check_model_mode
from compat_grads._src.core.mode import (
    EAGER,
    FUNCTION,
    GRAPH,
    as_graph,
    compiles_with_xla,
    execution_mode,
    in_tf1_graph,
    runs_eagerly,
)

__all__ = ["execution_mode"]
_KEPT = (EAGER, FUNCTION, GRAPH, as_graph, backend_for, check_model_mode, compiles_with_xla,
         in_tf1_graph, runs_eagerly)
"""Importable here as before the move (`compat_grads.dispatch.<name>`); not public API."""
