"""Packaging lives in setup.cfg; this file lets `pip install .` and editable installs work."""

from setuptools import setup

setup()
