"""A Sphinx extension: the `laplacian-ops` directive lists the op types the forward Laplacian
has a rule for, from its rule table (`compat_grads._src.traces.forward_laplacian`), so the list in
docs/traces.rst is never out of date."""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from compat_grads._src.traces import forward_laplacian as _forward_laplacian


class LaplacianOps(SphinxDirective):
    """`.. laplacian-ops::`: one paragraph naming every op type with a rule."""

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(_forward_laplacian.__file__)
        paragraph = nodes.paragraph()
        names = _forward_laplacian.ops_with_rules()
        paragraph += nodes.Text(f"The {len(names)} op types with a rule: ")
        for i, name in enumerate(names):
            paragraph += nodes.literal(text=name)
            paragraph += nodes.Text(", " if i < len(names) - 1 else ".")
        return [paragraph]


def setup(app) -> dict:
    app.add_directive("laplacian-ops", LaplacianOps)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
