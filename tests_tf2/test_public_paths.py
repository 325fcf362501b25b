"""Every public path a user's code may hold stays importable across the move of the private
code (CHANGELOG.md's deprecation policy), including what `compat-grads scan --fix` writes."""

import importlib
import pickle

import pytest

import compat_grads as cg

SCAN_FIX_HELPERS = ("gradient_rows", "gradient_row_list", "fill_gradient_rows",
                    "row_while_loop", "gradient_map_fn")
API = ("batch_divergence", "batch_hessian", "batch_hessian_diagonal", "batch_jacobian",
       "batch_laplacian", "divergence", "hessian", "hessian_diagonal", "hvp", "jvp",
       "laplacian", "per_element_gradients", "per_example_gradients", "stacked_jacobian",
       "vjp")
"""The public functions of 0.1.0, by name: none may go."""


@pytest.mark.parametrize("name", sorted(cg.__all__))
def test_every_package_name_resolves(name):
    assert getattr(cg, name) is not None


@pytest.mark.parametrize("name", API)
def test_every_function_of_the_first_release_is_in_the_package_and_in_api(name):
    api = importlib.import_module("compat_grads.api")
    assert name in cg.__all__ and name in api.__all__
    function = getattr(api, name)
    assert function is getattr(cg, name)
    assert function.__module__ == "compat_grads.api"  # help() and pickling name the face
    assert pickle.loads(pickle.dumps(function)) is function


def test_the_mode_is_where_it_was():
    from compat_grads.dispatch import execution_mode

    assert execution_mode is cg.execution_mode
    assert execution_mode() == "eager"


@pytest.mark.parametrize("name", SCAN_FIX_HELPERS)
def test_what_scan_fix_writes_is_importable(name):
    migrate = importlib.import_module("compat_grads.migrate")
    assert callable(getattr(migrate, name))


def test_every_testing_name_resolves():
    testing = importlib.import_module("compat_grads.testing")
    assert testing.__all__
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name


def test_the_suites_support_code_is_not_in_testing():
    testing = importlib.import_module("compat_grads.testing")
    for module in ("bad_inputs", "bad_input_routes", "value_checks", "estimates", "pinn",
                   "spies"):
        assert module not in testing.__all__
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"compat_grads.testing.{module}")
        importlib.import_module(f"compat_grads.testing._suite.{module}")
