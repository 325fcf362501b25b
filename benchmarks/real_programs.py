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
(`--repeats` times, interleaved, the order alternating), compares every output array
(bit-identical, max abs and max rel difference) and prints a markdown table. The copies, the
fix diffs and every run's output stay in the work directory. Nothing is downloaded and no
program is shipped here: it runs whatever DIR holds.
"""

import argparse
import dataclasses
import importlib.util
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
           "1-ulp spread", "build before/after s", "run before/after s", "ratio (build+run)",
           "wall before s", "wall after s", "wall ratio")


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
    before: list = dataclasses.field(default_factory=list)
    after: list = dataclasses.field(default_factory=list)
    build: tuple = (None, None)
    run: tuple = (None, None)
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


def _verdict(row: Row, first: Run, second: Run, manifest: dict) -> None:
    identical, row.max_abs, row.max_rel = _difference(first.arrays, second.arrays)
    if identical:
        row.outputs = "identical"
        return
    close = all(np.allclose(first.arrays[k], second.arrays[k], rtol=manifest.get("rtol", 1e-5),
                            atol=manifest.get("atol", 1e-6), equal_nan=True)
                for k in first.arrays) if first.arrays.keys() == second.arrays.keys() else False
    row.outputs = "close" if close else "DIFFERENT"
    if row.spread is not None:
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
    """`repeats` runs of each copy, alternating which goes first (drift hits both)."""
    runs = {name: [] for name in copies}
    for k in range(repeats):
        for name in list(copies) if k % 2 == 0 else list(copies)[::-1]:
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
        row.outputs = "fixed CRASHES" if good["original"] else "original crashes"
        return row
    first = good["original"][0]
    if any(not _difference(first.arrays, r.arrays)[0] for r in good["original"][1:]):
        row.errors.append("the original is not deterministic: two of its runs differ")
    if manifest.get("perturbed_env"):
        probe = work / folder.name / "perturbed"
        shutil.rmtree(probe, ignore_errors=True)
        shutil.copytree(folder, probe, ignore=shutil.ignore_patterns("__pycache__"))
        moved = _run(probe, manifest, manifest["perturbed_env"])
        row.spread = _difference(first.arrays, moved.arrays)[1] if moved.ok else None
    _verdict(row, first, good["fixed"][0], manifest)
    return row


def _number(value, spec=".2f") -> str:
    return "-" if value is None else format(value, spec)


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        before = statistics.median(r.before) if r.before else None
        after = statistics.median(r.after) if r.after else None
        cells = (r.program, r.findings, r.fixable, r.fixed, r.outputs, _number(r.max_abs, ".3g"),
                 _number(r.max_rel, ".3g"), _number(r.spread, ".3g"),
                 f"{_number(r.build[0])} / {_number(r.build[1])}",
                 f"{_number(r.run[0])} / {_number(r.run[1])}", _number(r.ratio),
                 _number(before), _number(after), _number(r.wall_ratio))
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
        args.json.write_text(json.dumps([dataclasses.asdict(r) | {"ratio": r.ratio,
                                                                 "wall_ratio": r.wall_ratio}
                                         for r in rows], indent=1))
    return 0 if all(r.outputs.startswith(("identical", "close")) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
