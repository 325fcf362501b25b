"""CG107: imports of (and calls through) TensorFlow's private `parallel_for.gradients` or
`gradients_impl`, which change without notice."""

from __future__ import annotations

import ast

from compat_grads.migrate.context import Context
from compat_grads.migrate.findings import REPORT_ONLY, Finding, Rule

DOCS = """\
.. code-block:: python

   from tensorflow.python.ops.parallel_for import gradients as pfor_gradients

Private modules change without notice (``jacobian`` returns ``None`` in eager mode,
``batch_jacobian`` fails on an unknown batch size); use ``cg.stacked_jacobian`` /
``cg.batch_jacobian``. Calls through such a module (``pfor_gradients.jacobian(y, x)``,
``gradients_impl.hessians(loss, x)``) are reported too, each with its public
replacement; ``gradients_impl.gradients`` is ``tf.compat.v1.gradients`` itself, read as
``tf.gradients`` by the rules of its idioms (CG101, CG112, ...). A Jacobian of
per-example losses, as TF Privacy takes it (``pfor_gradients.jacobian(vector_loss,
var_list)``, a target whose name says it holds losses), is named as what it is:
per-example gradients,
``cg.per_example_gradients(loss_fn, model, x, y, weights=var_list)``.
"""

PRIVATE = ("tensorflow.python.ops.parallel_for", "tensorflow.python.ops.gradients_impl")
# The private modules as Names spells them, and what replaces their functions.
_CANONICAL = tuple("tf." + m.removeprefix("tensorflow.") for m in PRIVATE)
REPLACEMENTS = {"jacobian": "cg.stacked_jacobian(y, x)",
                "batch_jacobian": "cg.batch_jacobian(y, x)",
                "hessians": "[cg.hessian(tf.reduce_sum(y), x)]",
                "pfor": "tf.vectorized_map, or cg.stacked_jacobian / cg.batch_jacobian for "
                        "Jacobians",
                "for_loop": "tf.map_fn or tf.while_loop",
                "_hessian_vector_product": "cg.hvp(f, x, v)"}
PER_EXAMPLE = ("cg.per_example_gradients(loss_fn, model, x, y, weights={weights}) (the rows "
               "of the Jacobian of {losses}, one loss per example, are the per-example "
               "gradients: write the model as a function of its input x and loss_fn(y_true, "
               "y_pred) giving one loss per example), or cg.stacked_jacobian({losses}, "
               "{weights})")
_OTHERWISE = "the public compat_grads functions"
_EAGER_NONE = " (its jacobian returns None in eager mode)"


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG107 at an import of a private module, or a call through one."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _private_import(ctx, node)
    name = ctx.names.qualname(node) if isinstance(node, ast.Call) else None
    if name is None or not name.startswith(_CANONICAL):
        return []
    advice = _per_example(node, name) or REPLACEMENTS.get(name.rpartition(".")[2], _OTHERWISE)
    return [ctx.finding(node, RULE.code, RULE.message(
        "call", call=ast.get_source_segment(ctx.source, node.func), use=advice))]


def _per_example(node: ast.Call, name: str) -> str | None:
    """The advice for `jacobian(per_example_losses, var_list)` (TF Privacy's per-example
    gradients): a target named for losses holds one loss per example, and the rows of its
    Jacobian are their gradients."""
    args = node.args if name.endswith(".jacobian") and len(node.args) >= 2 else []
    if not args or "loss" not in ast.unparse(args[0]).lower():
        return None
    return PER_EXAMPLE.format(losses=ast.unparse(args[0]), weights=ast.unparse(args[1]))


def _private_import(ctx: Context, node: ast.Import | ast.ImportFrom) -> list[Finding]:
    modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [f"{node.module}.{a.name}" for a in node.names] if node.module else [])
    hits = [m for m in modules if m.startswith(PRIVATE)]
    if not hits:
        return []
    why = _EAGER_NONE if hits[0].startswith("tensorflow.python.ops.parallel_for.gradients") else ""
    return [ctx.finding(node, RULE.code, RULE.message("import", module=hits[0], why=why))]


RULE = Rule(
    code="CG107", name="private-gradients-import", fix=REPORT_ONLY,
    summary="import of TensorFlow's private parallel_for.gradients or gradients_impl",
    messages={"call": "call through TensorFlow's private API ({call}): it changes without "
                      "notice; use {use}",
              "import": "private TensorFlow API {module}: it changes without notice{why}; use "
                        "cg.stacked_jacobian / cg.batch_jacobian / cg.hessian"},
    docs=DOCS, visits="nodes", check=check)
