"""Sphinx configuration: the guide, the migration notes and the API reference."""

project = "compat_grads"
author = "compat_grads developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = True
autodoc_typehints = "description"
html_theme = "alabaster"
exclude_patterns = ["_build"]
