"""`compat-grads scan --fix` on whole programs: `python benchmarks/real_programs.py DIR`.

DIR holds one folder per program, each with a `manifest.json`:

    {"entry": "run.py",            the script to run (from inside the folder)
     "outputs": ["out.npz"],       .npy / .npz files the script writes (paths in the folder)
     "timings": "timings.json",    optional: {"build": s, "run": s} written by the script
     "rtol": 1e-5, "atol": 1e-6,   how close the fixed program's outputs must be
     "perturbed_env": {"PERTURB_ULP": "1"},  optional: the script moves its inputs by one ulp
                                   under these variables; the original's own spread then
                                   tells rounding from a wrong value
     "args": [], "timeout": 900}   optional

For each program the harness copies the folder twice into a work directory, scans one copy
(`compat-grads scan --format json`), fixes the other (`--fix`), runs both in subprocesses
(`--repeats` times, interleaved, the order alternating; the original at least twice), compares
every output array (bit-identical, max abs and max rel difference) and prints a markdown table.

The outputs column reads:

- `unchanged`: `--fix` rewrote nothing, so there is nothing to compare; never a failure
  (`unchanged (not deterministic)` when the original's own runs differ).
- `identical` / `close`: the fixed program's arrays equal the original's, or lie within
  rtol/atol. A one-ulp spread (`perturbed_env`) adds `(rounding-level)` or `(> 10x spread)`.
- `not deterministic; after within its spread`: the original's own runs differ, and the fixed
  program's arrays lie inside their envelope (elementwise min..max of the original runs) widened
  by their run-to-run spread (the largest difference between two original runs). Not a failure.
  `not deterministic; after outside its spread` is, unless the arrays are also within
  rtol/atol (`close (not deterministic; after outside its spread)`).
- `DIFFERENT`, `fixed CRASHES`, `original crashes`: failures.

Each time ratio (fixed / original: median build + run from timings.json, and median wall time)
comes with its noise band: the smallest and largest ratio between two runs of the same code
(two runs of the original, or two of the fixed program), so a ratio inside the band is noise.

The exit status is 0 when every program is unchanged, identical, close or within its spread.
The copies, the fix diffs and every run's output stay in the work directory. Nothing is
downloaded and no program is shipped here: it runs whatever DIR holds.
"""

import argparse
import dataclasses
import importlib.util
import itertools
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ENV_DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0",
                "PYTHONHASHSEED": "0", "TF_USE_LEGACY_KERAS": "1"}
COLUMNS = ("program", "findings", "fixable", "fixed", "outputs", "max abs", "max rel",
           "run-to-run spread", "1-ulp spread", "build before/after s", "run before/after s",
           "ratio (build+run)", "noise band (build+run)", "wall before s", "wall after s",
           "wall ratio", "wall noise band")
PASSING = ("unchanged", "identical", "close", "not deterministic; after within")


@dataclasses.dataclass
class Run:
    seconds: float
    ok: bool
    log: str
    arrays: dict
    timings: dict


@dataclasses.dataclass
class Row:
    program: str
    findings: int = 0
    fixable: int = 0
    fixed: int = 0
    remaining: list = dataclasses.field(default_factory=list)
    outputs: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    spread: float | None = None
    run_spread: float | None = None
    before: list = dataclasses.field(default_factory=list)
    after: list = dataclasses.field(default_factory=list)
    build: tuple = (None, None)
    run: tuple = (None, None)
    same_code: list = dataclasses.field(default_factory=list)
    same_code_wall: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """fixed / original, in-process build + run time (the script's timings)."""
        if None in self.build + self.run:
            return None
        return (self.build[1] + self.run[1]) / (self.build[0] + self.run[0])

    @property
    def wall_ratio(self) -> float | None:
        """fixed / original, whole subprocess (TensorFlow's import included)."""
        if not (self.before and self.after):
            return None
        return statistics.median(self.after) / statistics.median(self.before)

    @property
    def noise(self) -> tuple | None:
        """(min, max) ratio of build + run between two runs of the same code."""
        return _band(self.same_code)

    @property
    def wall_noise(self) -> tuple | None:
        """(min, max) ratio of wall time between two runs of the same code."""
        return _band(self.same_code_wall)

    @property
    def passed(self) -> bool:
        return self.outputs.startswith(PASSING)


def _band(groups: list) -> tuple | None:
    """Smallest and largest ratio between two values of one group (one group per code)."""
    ratios = [a / b for values in groups for a, b in itertools.permutations(values, 2) if b > 0]
    return (min(ratios), max(ratios)) if ratios else None


def _environment() -> dict:
    """The caller's environment, quiet TensorFlow defaults, and this compat_grads first."""
    env = {**ENV_DEFAULTS, **os.environ}
    spec = importlib.util.find_spec("compat_grads")
    if spec is not None and spec.origin:
        root = str(pathlib.Path(spec.origin).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _scan(path: pathlib.Path, *options: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "compat_grads", "scan", "--format", "json",
                           *options, str(path)], capture_output=True, text=True, env=_environment())
    if done.returncode not in (0, 1):
        raise RuntimeError(f"scan {' '.join(options)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _load(path: pathlib.Path) -> dict:
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {f"{path.name}:{k}": data[k] for k in data.files}
    return {path.name: np.load(path, allow_pickle=False)}


def _run(folder: pathlib.Path, manifest: dict, extra_env: dict | None = None) -> Run:
    for name in manifest["outputs"] + [manifest.get("timings", "")]:
        if name and (folder / name).exists():
            (folder / name).unlink()
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, manifest["entry"], *manifest.get("args", [])],
                              cwd=folder, capture_output=True, text=True,
                              env={**_environment(), **(extra_env or {})},
                              timeout=manifest.get("timeout", 900))
        ok, log = done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired as err:
        ok, log = False, f"timed out after {err.timeout} s"
    seconds = time.perf_counter() - started
    arrays, timings = {}, {}
    for name in manifest["outputs"] if ok else ():
        if not (folder / name).exists():
            ok, log = False, log + f"\nno output {name}"
            break
        try:
            arrays.update(_load(folder / name))
        except ValueError as err:  # object arrays: a program bug, not a number to compare
            ok, log = False, log + f"\ncannot load {name}: {err}"
            break
    if ok and manifest.get("timings") and (folder / manifest["timings"]).exists():
        timings = json.loads((folder / manifest["timings"]).read_text())
    return Run(seconds, ok, log, arrays, timings)


def _difference(a: dict, b: dict) -> tuple[bool, float, float]:
    """(bit-identical, max abs diff, max rel diff) over every array of two runs."""
    if a.keys() != b.keys():
        return False, float("inf"), float("inf")
    identical, worst_abs, worst_rel = True, 0.0, 0.0
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, float("inf"), float("inf")
        identical &= x.tobytes() == y.tobytes()
        if x.size and np.issubdtype(x.dtype, np.number):
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            both_nan = np.isnan(x64) & np.isnan(y64)
            gap = np.where(both_nan, 0.0, np.abs(x64 - y64))
            scale = np.maximum(np.abs(x64), np.finfo(np.float64).tiny)
            worst_abs = max(worst_abs, float(np.nanmax(np.where(np.isnan(gap), np.inf, gap))))
            worst_rel = max(worst_rel, float(np.max(np.where(np.isnan(gap), np.inf, gap / scale))))
    return identical, worst_abs, worst_rel


def _close(first: dict, second: dict, manifest: dict) -> bool:
    return first.keys() == second.keys() and all(
        np.allclose(first[k], second[k], rtol=manifest.get("rtol", 1e-5),
                    atol=manifest.get("atol", 1e-6), equal_nan=True) for k in first)


def _run_spread(originals: list[Run]) -> float:
    """The largest max abs difference between two runs of the original (0: deterministic)."""
    return max((_difference(a.arrays, b.arrays)[1]
                for a, b in itertools.combinations(originals, 2)), default=0.0)


def _numbers_of_one_shape(arrays: list) -> bool:
    return all(a is not None and np.issubdtype(np.asarray(a).dtype, np.number)
               for a in arrays) and len({np.shape(a) for a in arrays}) == 1


def _within_spread(originals: list[Run], fixed: Run, spread: float) -> bool:
    """Every fixed array inside the originals' elementwise envelope, widened by `spread`
    (an array that is not numbers, or not of one shape in every run, must equal one run's)."""
    for key, value in fixed.arrays.items():
        runs = [r.arrays.get(key) for r in originals]
        if any(_difference({key: value}, {key: run})[0] for run in runs if run is not None):
            continue
        if not _numbers_of_one_shape(runs + [value]):
            return False
        stack = np.stack([np.asarray(run, np.float64) for run in runs])
        value = np.asarray(value, np.float64)
        outside = np.maximum(stack.min(0) - value, value - stack.max(0))
        if value.size and not np.all(np.where(np.isnan(value), np.isnan(stack).any(0),
                                              outside <= spread)):
            return False
    return fixed.arrays.keys() == originals[0].arrays.keys()


def _verdict(row: Row, originals: list[Run], fixed: Run, manifest: dict) -> None:
    """The outputs cell: unchanged, identical, close, within the original's spread, DIFFERENT."""
    first = originals[0]
    identical, row.max_abs, row.max_rel = _difference(first.arrays, fixed.arrays)
    row.run_spread = _run_spread(originals)
    if row.fixed == 0:
        row.outputs = "unchanged (not deterministic)" if row.run_spread else "unchanged"
    elif row.run_spread > 0:
        within = _within_spread(originals, fixed, row.run_spread)
        row.outputs = f"not deterministic; after {'within' if within else 'outside'} its spread"
        if not within and _close(first.arrays, fixed.arrays, manifest):
            row.outputs = f"close ({row.outputs})"
    elif identical:
        row.outputs = "identical"
    else:
        row.outputs = "close" if _close(first.arrays, fixed.arrays, manifest) else "DIFFERENT"
    if row.spread is not None and row.outputs in ("close", "DIFFERENT"):
        row.outputs += " (rounding-level)" if row.max_abs <= 10 * row.spread else " (> 10x spread)"


def _timings(runs: list[Run], key: str) -> float | None:
    values = [r.timings[key] for r in runs if key in r.timings]
    return statistics.median(values) if values else None


def _scan_and_fix(row: Row, original: pathlib.Path, fixed: pathlib.Path) -> None:
    scanned = _scan(original)
    row.findings = len(scanned["findings"])
    row.fixable = sum(f["fixable"] for f in scanned["findings"])
    (original.parent / "fix.diff").write_text("".join(_scan(original, "--diff")["diffs"]))
    fix = _scan(fixed, "--fix")
    row.fixed = fix["fixed"]
    row.remaining = [f"{f['code']} {pathlib.Path(f['path']).name}:{f['line']}"
                     for f in fix["findings"]]


def _interleaved(copies: dict, manifest: dict, repeats: int) -> dict:
    """`repeats` runs of each copy (the original at least two, to see whether it is
    deterministic), alternating which goes first (drift hits both)."""
    wanted = {name: max(2, repeats) if name == "original" else repeats for name in copies}
    runs = {name: [] for name in copies}
    for k in range(max(wanted.values())):
        for name in list(copies) if k % 2 == 0 else list(copies)[::-1]:
            if len(runs[name]) < wanted[name]:
                runs[name].append(_run(copies[name], manifest))
    for name, folder in copies.items():
        (folder.parent / f"{name}.log").write_text(runs[name][0].log)
    return runs


def _record(row: Row, runs: dict) -> dict:
    """Failures into row.errors, times of the good runs into the row; returns the good runs."""
    for name, done in runs.items():
        failed = [r for r in done if not r.ok]
        if failed:
            last = (failed[0].log.strip().splitlines() or ["no output"])[-1]
            row.errors.append(f"{name} failed ({len(failed)}/{len(done)} runs): {last}")
    good = {name: [r for r in done if r.ok] for name, done in runs.items()}
    row.before = [r.seconds for r in good["original"]]
    row.after = [r.seconds for r in good["fixed"]]
    row.build = (_timings(good["original"], "build"), _timings(good["fixed"], "build"))
    row.run = (_timings(good["original"], "run"), _timings(good["fixed"], "run"))
    row.same_code = [[r.timings["build"] + r.timings["run"] for r in done
                      if {"build", "run"} <= r.timings.keys()] for done in good.values()]
    row.same_code_wall = [[r.seconds for r in done] for done in good.values()]
    return good


def check_program(folder: pathlib.Path, work: pathlib.Path, repeats: int) -> Row:
    manifest = json.loads((folder / "manifest.json").read_text())
    row = Row(folder.name)
    copies = {name: work / folder.name / name for name in ("original", "fixed")}
    for copy in copies.values():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    _scan_and_fix(row, copies["original"], copies["fixed"])
    good = _record(row, _interleaved(copies, manifest, repeats))
    if not (good["original"] and good["fixed"]):
        crashed = "fixed CRASHES" if good["original"] else "original crashes"
        row.outputs = "unchanged (runs fail: see below)" if row.fixed == 0 else crashed
        return row
    first = good["original"][0]
    if manifest.get("perturbed_env"):
        probe = work / folder.name / "perturbed"
        shutil.rmtree(probe, ignore_errors=True)
        shutil.copytree(folder, probe, ignore=shutil.ignore_patterns("__pycache__"))
        moved = _run(probe, manifest, manifest["perturbed_env"])
        row.spread = _difference(first.arrays, moved.arrays)[1] if moved.ok else None
    _verdict(row, good["original"], good["fixed"][0], manifest)
    if row.run_spread:
        row.errors.append(f"the original is not deterministic: its {len(good['original'])} runs"
                          f" differ by up to {row.run_spread:.3g} (max abs)")
    return row


def _number(value, spec=".2f") -> str:
    return "-" if value is None else format(value, spec)


def _range(band: tuple | None) -> str:
    return "-" if band is None else f"{band[0]:.2f}–{band[1]:.2f}"


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        before = statistics.median(r.before) if r.before else None
        after = statistics.median(r.after) if r.after else None
        cells = (r.program, r.findings, r.fixable, r.fixed, r.outputs, _number(r.max_abs, ".3g"),
                 _number(r.max_rel, ".3g"), _number(r.run_spread, ".3g"),
                 _number(r.spread, ".3g"), f"{_number(r.build[0])} / {_number(r.build[1])}",
                 f"{_number(r.run[0])} / {_number(r.run[1])}", _number(r.ratio),
                 _range(r.noise), _number(before), _number(after), _number(r.wall_ratio),
                 _range(r.wall_noise))
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    notes = [f"- {r.program}: {e}" for r in rows for e in r.errors]
    notes += [f"- {r.program}: left after --fix: {', '.join(r.remaining)}"
              for r in rows if r.remaining]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=pathlib.Path, help="one folder per program")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side")
    parser.add_argument("--work", type=pathlib.Path, help="where the copies go (kept)")
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows here")
    args = parser.parse_args(argv)
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="real_programs_"))
    folders = sorted(p.parent for p in args.directory.glob("*/manifest.json"))
    if args.only:
        folders = [f for f in folders if f.name in args.only.split(",")]
    if not folders:
        parser.error(f"no */manifest.json under {args.directory}")
    rows = []
    for folder in folders:
        rows.append(check_program(folder, work, max(1, args.repeats)))
        print(f"{folder.name}: {rows[-1].outputs}", file=sys.stderr, flush=True)
    print(markdown(rows))
    print(f"\ncopies, diffs and logs: {work}")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) | {
            "ratio": r.ratio, "wall_ratio": r.wall_ratio, "noise": r.noise,
            "wall_noise": r.wall_noise, "passed": r.passed} for r in rows], indent=1))
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
