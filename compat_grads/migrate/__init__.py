"""`compat-grads scan`: finds legacy TF1 gradient idioms with `ast` and rewrites those whose
meaning is provably kept with LibCST (imported only for `--diff` / `--fix`), and the
runtime-checked helpers (`gradient_rows`, `gradient_row_list`, `fill_gradient_rows`,
`row_while_loop`, `gradient_map_fn`) it rewrites to where the source alone cannot
prove a rewrite. The helpers live in `compat_grads.migrate.runtime`, loaded (with
TensorFlow) on first use of one of their names, never by the scanner."""

from __future__ import annotations

import importlib

_RUNTIME = ("fill_gradient_rows", "gradient_map_fn", "gradient_row_list", "gradient_rows",
            "row_while_loop")
# The scanner's names, loaded on first use too: a program --fix rewrote imports the helpers
# alone (the rules took 60 ms of its graph's build time).
_SCANNER = {"CODES": "compat_grads.migrate.codes", "ScanError": "compat_grads.migrate.sources",
            **dict.fromkeys(("add_arguments", "fix_text", "run", "scan_text"),
                            "compat_grads.migrate.command")}

__all__ = ["CODES", "ScanError", "add_arguments", "fill_gradient_rows", "fix_text",
           "gradient_map_fn", "gradient_row_list", "gradient_rows", "row_while_loop", "run",
           "scan_text"]


def __getattr__(name: str):
    if name in _RUNTIME:
        return getattr(importlib.import_module("compat_grads.migrate.runtime"), name)
    if name in _SCANNER:
        return getattr(importlib.import_module(_SCANNER[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_RUNTIME) | set(_SCANNER))
