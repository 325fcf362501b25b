"""The TensorFlow side of `compat_grads.migrate`: the runtime-checked helpers that
`compat-grads scan --fix` writes calls to (`cg.migrate.gradient_rows`, ...). Importing this
package imports TensorFlow; `compat_grads.migrate` loads it on first use of one of its
names, so the scanner itself never does."""

from compat_grads.migrate.runtime.loops import gradient_map_fn, row_while_loop
from compat_grads.migrate.runtime.rows import fill_gradient_rows, gradient_row_list, gradient_rows

__all__ = ["fill_gradient_rows", "gradient_map_fn", "gradient_row_list", "gradient_rows",
           "row_while_loop"]
