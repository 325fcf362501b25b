"""The docstring paragraphs several public functions share, written once.

A public docstring names a shared paragraph by a line of its own, `{compile}`, at the
indentation the paragraph takes; `fill` replaces it when the module is imported, so `help()`,
the doctests and the API reference all read the full text.
"""

from __future__ import annotations

import textwrap

WIDTH = 96
"""The longest docstring line, indentation included."""

PARAGRAPHS = {
    "target": "target: the tensor `y` (graph mode and `tf.function`; in eager mode together "
              "with the `tape` that recorded it), or a callable `f(sources) -> y` (every "
              "mode).",
    "tape": "tape: the `tf.GradientTape` that recorded an eager tensor target.",
    "unconnected_gradients": 'unconnected_gradients: "none" or "zero", as in '
                             "`stacked_jacobian`.",
    "chunk_size": "chunk_size: at most this many rows (or columns) in flight at once, to "
                  "bound memory.",
    "max_bytes": "max_bytes: the most memory, in bytes, the result and the rows in flight at "
                 "once may take (default 16 GiB); a larger Jacobian raises ValueError at "
                 "once, before anything is built or run. Sizes known only at run time are not "
                 "counted; None: no limit.",
    "compile": "compile: in eager mode, run a callable target through a tf.function traced "
               "once per callable, options and input shapes, and cached (False: run it "
               "eagerly).",
    "jit_compile": "jit_compile: compile that tf.function with XLA.",
    "devices": "Or a list of device names (the TF1 way: the pieces are placed with "
               "`tf.device` in one graph). `chunk_size` applies within each piece; see the "
               '"Several devices and workers" page.',
    "gather": "gather: with `distribute`, return one result (True), or the pieces (False): "
              "the strategy's per-replica values, or a list with one result per device.",
}
"""Each paragraph by its placeholder. One that starts with its name and a colon is an
argument: its continuation lines are indented two more columns."""


def fill(doc: str | None) -> str | None:
    """`doc` with each placeholder line replaced by its paragraph, wrapped at `WIDTH`.

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
        name = text[1:-1]
        paragraph = PARAGRAPHS[name]
        indent = line[:len(line) - len(line.lstrip())]
        hanging = indent + "  " if paragraph.startswith(f"{name}:") else indent
        lines += textwrap.wrap(paragraph, WIDTH, initial_indent=indent,
                               subsequent_indent=hanging)
    return "\n".join(lines)
