"""The bad-input catalogue's case table (compat_grads.testing._suite.bad_inputs) on every TF2 route
of each entry, and the catalogue itself: every test of the bad-input files is a kind of it,
and every kind collects a test.

The plain tests of the catalogue are in the tests_tf2/test_input_*.py files (and the cache
and thread tests in test_compile_cache.py); tests_tf1/test_bad_input_tf1.py runs the table
in a TF1 process. `python tests_tf2/bad_input_totals.py` counts kinds per mode.
"""

import bad_input_totals
import pytest

from compat_grads.testing._suite import bad_input_routes as br
from compat_grads.testing._suite import bad_inputs

KINDS = bad_inputs.kinds(br.TF2_MODES)


@pytest.mark.parametrize("case, route", bad_inputs.params(br.TF2_MODES))
def test_bad_input(case, route):
    br.check(case, route)


def test_every_test_is_a_kind_of_the_catalogue():
    unnamed = bad_input_totals.unnamed_tests("tf2")
    assert unnamed == {"test_input_table.py": {"test_every_test_is_a_kind_of_the_catalogue",
                                               "test_every_kind_collects_a_test"}}


def test_every_kind_collects_a_test():
    table, problems = bad_input_totals.catalogue(["tf2"])
    assert problems == []
    assert len({name for _, name in table}) >= 60
    assert {outcome for outcome, _ in table.values()} == {"value", "error"}
