"""`compat-grads scan`: finds legacy TF1 gradient idioms with `ast` and rewrites those whose
meaning is provably kept with LibCST (imported only for `--diff` / `--fix`), and the
runtime-checked helpers (`gradient_rows`, `gradient_row_list`, `fill_gradient_rows`,
`row_while_loop`, `gradient_map_fn`) it rewrites to where the source alone cannot
prove a rewrite (they import TensorFlow when called, never at import)."""

from compat_grads.migrate.codes import CODES
from compat_grads.migrate.command import add_arguments, fix_text, run, scan_text
from compat_grads.migrate.helpers import (
                                          fill_gradient_rows,
                                          gradient_map_fn,
                                          gradient_row_list,
                                          gradient_rows,
                                          row_while_loop,
)
from compat_grads.migrate.sources import ScanError

__all__ = ["CODES", "ScanError", "add_arguments", "fill_gradient_rows", "fix_text",
           "gradient_map_fn", "gradient_row_list", "gradient_rows", "row_while_loop", "run",
           "scan_text"]
