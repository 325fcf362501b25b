"""A Sphinx extension: TensorFlow's and NumPy's names link to their API pages.

- Autodoc names a type where it is defined (`tensorflow.python.eager.backprop.GradientTape`);
  users and TensorFlow's API docs know it as `tf.GradientTape`. Every Python reference to a
  `tensorflow.*` object is rewritten to the name TensorFlow's API docs file it under, so
  intersphinx links it to tensorflow.org and the page shows `tf.GradientTape`. A name
  TensorFlow does not export is left as it is.
- Inline code that is just such a name (``tf.function``, ``np.ndarray`` in the guides)
  becomes a reference too: a link where the inventories know the name, code as before where
  they do not.
"""

from __future__ import annotations

import importlib
import re

from docutils import nodes
from sphinx import addnodes

_API_NAME = re.compile(r"(tf|np|numpy)(\.\w+)+")


def public_name(target: str) -> str | None:
    """"tf.GradientTape" for "tensorflow.python.eager.backprop.GradientTape" (or its
    "~"-prefixed short form), None for anything TensorFlow does not export."""
    module_name, _, name = target.lstrip("~").rpartition(".")
    if not module_name.startswith("tensorflow"):
        return None
    try:
        value = getattr(importlib.import_module(module_name), name)
        from tensorflow.python.util import tf_export
    except (ImportError, AttributeError):
        return None
    try:  # what TensorFlow's API docs use: "math.reduce_sum", "compat.v1.Session"
        canonical = tf_export.get_canonical_name_for_symbol(value, add_prefix_to_v1_names=True)
    except Exception:  # noqa: BLE001 - a private API: any failure means "not exported"
        canonical = None
    return f"tf.{canonical}" if canonical else None


def _is_tensorflow(target: str) -> bool:
    return target.startswith(("tensorflow.", "~tensorflow."))


def _rewrite(app, doctree) -> None:
    for ref in list(doctree.findall(addnodes.pending_xref)):
        if ref.get("refdomain") == "py" and _is_tensorflow(ref["reftarget"]):
            public = public_name(ref["reftarget"])
            if public is not None:
                ref["reftarget"] = public
                if not ref.get("refexplicit"):
                    shown = ref.children[0]
                    shown.replace_self(shown.__class__(public, public))
    # Sphinx leaves a type after a Literal[...] in a union as text: make it a reference too
    for text in list(doctree.findall(addnodes.literal_emphasis)):
        public = _is_tensorflow(text.astext()) and public_name(text.astext())
        if public and not isinstance(text.parent, addnodes.pending_xref):
            ref = addnodes.pending_xref("", addnodes.literal_emphasis(public, public),
                                        refdomain="py", reftype="class", reftarget=public,
                                        refexplicit=False, refdoc=app.env.docname)
            text.parent.replace(text, ref)


def _link_literals(app, doctree) -> None:
    for literal in list(doctree.findall(nodes.literal)):
        if (_API_NAME.fullmatch(literal.astext())
                and not isinstance(literal.parent, (nodes.reference, addnodes.pending_xref))):
            ref = addnodes.pending_xref("", literal.deepcopy(), refdomain="py", reftype="obj",
                                        reftarget=literal.astext(), refexplicit=True,
                                        refdoc=app.env.docname)
            literal.parent.replace(literal, ref)


def setup(app):
    app.connect("doctree-read", _rewrite)
    app.connect("doctree-read", _link_literals)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
