"""The bad-input catalogue's totals: kinds per mode, right values and clear errors.

    python tests_tf2/bad_input_totals.py

Collects tests_tf2/test_bad_input.py (eager, tf.function, v1 Graph) and
tests_tf1/test_bad_input_tf1.py (TF1, in a process of its own, as pytest runs it), maps each
collected test to its kind with the KINDS table of its file, and prints, per mode, how many
kinds run there and what they must give. A kind whose tests collect nothing is an error.
"""

import importlib.util
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILES = {"tf2": os.path.join("tests_tf2", "test_bad_input.py"),
         "tf1": os.path.join("tests_tf1", "test_bad_input_tf1.py")}
TF2_MODES = ("eager", "function", "v1graph")


def collected(path):
    """{test name: [parameter ids]} as pytest collects `path` (in a process of its own)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", path],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tests = {}
    for line in out.splitlines():
        found = re.match(r"^[\w/.]+::(\w+)(?:\[(.*)\])?$", line.strip())
        if found:
            tests.setdefault(found.group(1), []).append(found.group(2) or "")
    return tests


def kinds_of(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3],
                                                  os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.KINDS


def modes_of(ids, suite, declared):
    if suite == "tf1":
        return {"tf1"}
    if declared:
        return set(declared)
    found = {token.split(".")[0] for i in ids for token in i.split("-")
             if token.split(".")[0] in TF2_MODES}
    return found or {"eager"}


def main():
    table, problems = {}, []
    for suite, path in FILES.items():
        tests = collected(path)
        for name, outcome, test, *rest in kinds_of(path):
            select, declared = (rest + [None, None])[:2]
            ids = [i for i in tests.get(test, []) if select is None or re.search(select, i)]
            if not ids:
                problems.append(f"{suite}: kind {name!r} collects no test")
            table[suite, name] = (outcome, modes_of(ids, suite, declared))
    modes = (*TF2_MODES, "tf1")
    print(f"{'mode':10} {'kinds':>6} {'values':>7} {'errors':>7}")
    for mode in modes:
        here = [outcome for outcome, where in table.values() if mode in where]
        print(f"{mode:10} {len(here):6} {here.count('value'):7} {here.count('error'):7}")
    runs = [o for o, where in table.values() for _ in where]
    print(f"{'all':10} {len(runs):6} {runs.count('value'):7} {runs.count('error'):7}"
          "   (kind x mode runs)")
    names = {name for _, name in table}
    for suite in FILES:
        count = sum(1 for s, _ in table if s == suite)
        print(f"{suite} kinds: {count}")
    print(f"distinct kinds (by name, both suites): {len(names)}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
