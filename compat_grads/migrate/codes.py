"""The finding codes: stable identifiers, one per legacy idiom, documented in docs/scan.rst."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Code:
    """One family of findings.

    Attributes:
      code: the stable identifier printed with every finding, e.g. "CG101".
      name: a short kebab-case name.
      fixable: whether `--fix` rewrites instances whose meaning it can prove is kept.
      summary: one line for `--help` and the docs.
    """

    code: str
    name: str
    fixable: bool
    summary: str


CODES = {c.code: c for c in (
    Code("CG101", "jacobian-loop", True,
         "tf.gradients(y[i], x) in a for loop or list comprehension: a hand-built Jacobian"),
    Code("CG102", "jacobian-stack", True,
         "tf.stack([tf.gradients(y[i], x)[0] for i in ...]): a hand-built Jacobian"),
    Code("CG103", "map-fn-gradients", True,
         "tf.map_fn whose function calls tf.gradients (over values of y it fails at run time)"),
    Code("CG104", "tape-slice-source", False,
         "tape.gradient(f, x[:, k]): a slice made after recording has no gradient (None)"),
    Code("CG105", "hessians", True,
         "tf.hessians / tf.compat.v1.hessians: graph only, one row at a time"),
    Code("CG106", "double-gradients-jvp", True,
         "tf.gradients of tf.gradients with respect to grad_ys: the forward-mode trick"),
    Code("CG107", "private-gradients-import", False,
         "import of TensorFlow's private parallel_for.gradients or gradients_impl"),
    Code("CG108", "keras-backend-gradients", False,
         "K.gradients / tf.keras.backend.gradients: graph only, gone in Keras 3"),
    Code("CG109", "while-loop-jacobian", True,
         "tf.gradients / tape.gradient of one row per tf.while_loop iteration (inline, or "
         "through your own while_loop map helper): a hand-built Jacobian"),
    Code("CG110", "tape-gradient-loop", False,
         "tape.gradient(y[i], x) in a for loop or comprehension: one backward pass per row "
         "(None for rows sliced after the tape stopped recording)"),
)}


def select(selected: list[str], ignored: list[str]) -> set[str]:
    """The codes to report: those matching a `selected` prefix, minus `ignored` prefixes.

    Args:
      selected: code prefixes (`["CG1"]`, `["CG101", "CG105"]`); empty means all codes.
      ignored: code prefixes to leave out.

    Returns:
      The set of codes.

    Raises:
      ValueError: for a prefix that matches no code.
    """
    for prefix in selected + ignored:
        if not any(code.startswith(prefix.upper()) for code in CODES):
            raise ValueError(f"unknown code {prefix!r} (known: {', '.join(CODES)})")
    chosen = {c for c in CODES if not selected or any(c.startswith(p.upper()) for p in selected)}
    return {c for c in chosen if not any(c.startswith(p.upper()) for p in ignored)}
