"""Sphinx configuration: the guide, the migration notes and the API reference."""

project = "compat_grads"
author = "compat_grads developers"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_copybutton",
]
# Single backticks in our Google-style docstrings are code: a Python reference, linked when
# it names something documented here, monospace text when it does not.
default_role = "py:obj"
napoleon_google_docstring = True
autodoc_typehints = "description"
# Copy the code, not the prompts: doctest ">>> " / "... " and console "$ ".
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
html_theme = "furo"
html_title = "compat_grads"
html_static_path = ["_static"]
html_css_files = ["wide.css"]
exclude_patterns = ["_build"]
