"""The scanner's rules, one module each (`cgNNN_<name>.py`): its code, messages, reasons
for not rewriting, documentation and check. This list is the one place a rule is
registered: the code table (`codes.CODES`), the walk (`finder`) and the rule list of
docs/scan.rst are made from it."""

from __future__ import annotations

from compat_grads.migrate.rules import (
                                        cg101_jacobian_loop,
                                        cg102_jacobian_stack,
                                        cg103_map_fn_gradients,
                                        cg104_tape_slice_source,
                                        cg105_hessians,
                                        cg106_double_gradients_jvp,
                                        cg107_private_gradients_import,
                                        cg108_keras_backend_gradients,
                                        cg109_while_loop_jacobian,
                                        cg110_tape_gradient_loop,
                                        cg111_laplacian_loop,
                                        cg112_double_gradients_hvp,
                                        cg113_per_example_session_runs,
)

MODULES = (cg101_jacobian_loop, cg102_jacobian_stack, cg103_map_fn_gradients,
           cg104_tape_slice_source, cg105_hessians, cg106_double_gradients_jvp,
           cg107_private_gradients_import, cg108_keras_backend_gradients,
           cg109_while_loop_jacobian, cg110_tape_gradient_loop, cg111_laplacian_loop,
           cg112_double_gradients_hvp, cg113_per_example_session_runs)
RULES = tuple(module.RULE for module in MODULES)

__all__ = ["MODULES", "RULES", "rst_lines"]


def rst_lines() -> list[str]:
    """The rule list of docs/scan.rst, as reStructuredText lines: one definition-list item
    per rule, its heading the term and its docs the definition."""
    lines = []
    for rule in RULES:
        lines.append(rule.heading)
        lines += [f"   {line}" if line else "" for line in rule.docs.splitlines()]
        lines.append("")
    return lines
