"""A Sphinx extension: the `scan-rules` directive writes the rule list of docs/scan.rst from
the rule modules (`compat_grads/migrate/rules/`), so a rule's documentation is written once,
next to its check. Each rule becomes one definition-list item, its heading
`CODE — name (what --fix does)` and its body the module's `DOCS`."""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from compat_grads.migrate import rules


class ScanRules(SphinxDirective):
    """`.. scan-rules::`: every rule of `compat_grads.migrate.rules.RULES`, in order."""

    def run(self) -> list[nodes.Node]:
        for module in rules.MODULES:
            self.env.note_dependency(module.__file__)
        source = StringList(rules.rst_lines(), source="compat_grads/migrate/rules")
        container = nodes.container()
        self.state.nested_parse(source, self.content_offset, container)
        return container.children


def setup(app) -> dict:
    app.add_directive("scan-rules", ScanRules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
