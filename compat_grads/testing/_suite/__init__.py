"""Support code only the project's own test suites use (`tests_tf1/`, `tests_tf2/`): the
bad-input case table and its routes, the value/aux checks, the Hutchinson estimate checks,
the PINN fixtures and the op spies. Private: not part of `compat_grads.testing`'s API, and
free to change with the tests."""
