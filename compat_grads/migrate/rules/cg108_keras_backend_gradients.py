"""CG108: `K.gradients` / `tf.keras.backend.gradients`, graph only and gone in Keras 3."""

from __future__ import annotations

import ast

from compat_grads.migrate.context import Context
from compat_grads.migrate.findings import REPORT_ONLY, Finding, Rule

DOCS = """\
.. code-block:: python

   grads = K.gradients(loss, model.trainable_weights)

Graph-only, and gone in Keras 3: use ``tf.GradientTape``, or ``compat_grads`` for
Jacobian-type derivatives.
"""


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG108 at a Keras backend `gradients` call."""
    if not (isinstance(node, ast.Call)
            and ctx.names.qualname(node) == "tf.keras.backend.gradients"):
        return []
    return [ctx.finding(node, RULE.code, RULE.messages["keras"])]


RULE = Rule(
    code="CG108", name="keras-backend-gradients", fix=REPORT_ONLY,
    summary="K.gradients / tf.keras.backend.gradients: graph only, gone in Keras 3",
    messages={"keras": "K.gradients is graph-only and gone in Keras 3; use tf.GradientTape, "
                       "or cg.stacked_jacobian / cg.per_element_gradients for Jacobian-type "
                       "derivatives"},
    docs=DOCS, visits="nodes", check=check)
