"""Sphinx configuration: the guide, the migration notes, the API reference, performance.

The build needs no network: TensorFlow's and NumPy's inventories are generated files in
_inventories/ (docs/make_inventories.py), and _ext/ holds the local extensions: TensorFlow's
names as links (api_links), and scan.rst's rule list made from the rule modules (scan_rules).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "_ext"))

project = "compat_grads"
author = "compat_grads developers"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    "api_links",
    "scan_rules",
    "laplacian_ops",
]
# Single backticks in our Google-style docstrings are code: a Python reference, linked when
# it names something (ours, TensorFlow's, NumPy's), monospace text when it does not.
default_role = "py:obj"
napoleon_google_docstring = True
autodoc_typehints = "description"
intersphinx_mapping = {
    "tensorflow": ("https://www.tensorflow.org/api_docs/python/", "_inventories/tensorflow.inv"),
    "numpy": ("https://numpy.org/doc/stable/", "_inventories/numpy.inv"),
}
# Copy the code, not the prompts: doctest ">>> " / "... " and console "$ ".
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
html_theme = "furo"
html_title = "compat_grads"
html_static_path = ["_static"]
html_css_files = ["wide.css"]
exclude_patterns = ["_build"]
