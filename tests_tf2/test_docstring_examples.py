"""Every public docstring's example runs as a user pastes it from `help()`: in an empty
namespace, with its own imports (the doctests of `pytest --doctest-modules` see the module's
globals instead, where `tf` is always defined)."""

import doctest
import inspect

import pytest

import compat_grads as cg

PUBLIC = [name for name in cg.__all__ if inspect.isfunction(getattr(cg, name))]


@pytest.mark.parametrize("name", PUBLIC)
def test_the_example_runs_in_an_empty_namespace(name):
    docstring = getattr(cg, name).__doc__
    test = doctest.DocTestParser().get_doctest(docstring, {}, name, None, 0)
    assert test.examples, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: None)
    assert runner.failures == 0, f"{name}'s example fails in an empty namespace"
