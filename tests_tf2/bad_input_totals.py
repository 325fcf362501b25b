"""The bad-input catalogue's totals: kinds per mode, right values and clear errors.

    python tests_tf2/bad_input_totals.py

Collects the TF2 bad-input files (tests_tf2/test_input_*.py and test_compile_cache.py:
eager, tf.function, v1 Graph) and tests_tf1/test_bad_input_tf1.py (TF1, in a process of its
own, as pytest runs it), maps each collected test to its kind with the KINDS of its file
(generated from compat_grads.testing._suite.bad_inputs.TABLE for the table's runner, declared for
plain tests), and prints, per mode, how many kinds run there and what they must give. A
kind whose tests collect nothing is an error.
"""

import glob
import importlib.util
import os
import re
import subprocess
import sys

from compat_grads.testing._suite.bad_input_routes import EAGER, TF1, TF2_MODES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILES = {"tf2": [*sorted(os.path.relpath(path, ROOT) for path in
                         glob.glob(os.path.join(HERE, "test_input_*.py"))),
                 os.path.join("tests_tf2", "test_compile_cache.py")],
         "tf1": [os.path.join("tests_tf1", "test_bad_input_tf1.py")]}


def collected(paths):
    """{(file name, test name): [parameter ids]} as pytest collects `paths` (in a process of
    its own)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *paths],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tests = {}
    for line in out.splitlines():
        found = re.match(r"^([\w/.]+)::(\w+)(?:\[(.*)\])?$", line.strip())
        if found:
            key = (os.path.basename(found.group(1)), found.group(2))
            tests.setdefault(key, []).append(found.group(3) or "")
    return tests


def module_of(path):
    """The test module at `path` (relative to the repository), loaded afresh."""
    spec = importlib.util.spec_from_file_location(
        "_catalogue_" + os.path.basename(path)[:-3], os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unnamed_tests(suite):
    """{file name: the tests of the file that no kind of its KINDS names} in `suite`; a kind
    naming a test the file does not have is listed as "missing <test>"."""
    unnamed = {}
    for path in FILES[suite]:
        module = module_of(path)
        tests = {name for name in vars(module) if name.startswith("test_")}
        named = {kind[2] for kind in module.KINDS}
        left = (tests - named) | {f"missing {test}" for test in named - tests}
        if left:
            unnamed[os.path.basename(path)] = left
    return unnamed


def modes_of(ids, suite, declared):
    if suite == "tf1":
        return {TF1}
    if declared:
        return set(declared)
    found = {token.split(".")[0] for i in ids for token in i.split("-")
             if token.split(".")[0] in TF2_MODES}
    return found or {EAGER}


def catalogue(suites=tuple(FILES)):
    """({(suite, kind): (outcome, modes)}, [problems]) of the kinds in `suites`."""
    table, problems = {}, []
    for suite in suites:
        tests = collected(FILES[suite])
        for path in FILES[suite]:
            for name, outcome, test, *rest in module_of(path).KINDS:
                select, declared = (list(rest) + [None, None])[:2]
                ids = [i for i in tests.get((os.path.basename(path), test), [])
                       if select is None or re.search(select, i)]
                if not ids:
                    problems.append(f"{suite}: kind {name!r} collects no test")
                before = table.get((suite, name), (outcome, set()))
                table[suite, name] = (before[0], before[1] | modes_of(ids, suite, declared))
    return table, problems


def main():
    table, problems = catalogue()
    print(f"{'mode':10} {'kinds':>6} {'values':>7} {'errors':>7}")
    for mode in (*TF2_MODES, TF1):
        here = [outcome for outcome, where in table.values() if mode in where]
        print(f"{mode:10} {len(here):6} {here.count('value'):7} {here.count('error'):7}")
    runs = [o for o, where in table.values() for _ in where]
    print(f"{'all':10} {len(runs):6} {runs.count('value'):7} {runs.count('error'):7}"
          "   (kind x mode runs)")
    for suite in FILES:
        count = sum(1 for s, _ in table if s == suite)
        print(f"{suite} kinds: {count}")
    print(f"distinct kinds (by name, both suites): {len({name for _, name in table})}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
