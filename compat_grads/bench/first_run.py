"""The first run: how long `compat-grads check` takes a new user, each run in a fresh process
(TensorFlow's import, the TF1 process's start and the quick check, as a user meets them).

`compat-grads bench` runs it (`suite.run`: three runs of the quick check; with `--quick`,
one run of one item); alone, `python -m compat_grads.bench.first_run [RUNS] [--json FILE]
[-- CHECK ARGS]` prints the runs and writes their JSON. Besides the wall time, each run
records the CPU time of all its processes (user + sys of the check and the worker processes
it waited for), which other processes' load changes less than the wall time, the load
average when it started and the CPU time other processes took meanwhile (from /proc/stat):
a run is quiet when they used under `QUIET` of the cores. Each run waits until the machine
is quiet, and runs that were not are repeated (`run`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

COMMAND = ("compat-grads", "check")
GOAL_S = 30.0
"""The quick check's wall time on a quiet 2-core machine, start-up included (issue 47)."""
QUICK_ARGS = ("-k", "scalar_stack-stacked_jacobian-forward")
"""`compat-grads bench --quick` checks that the workload runs: one item, once."""
QUIET = 0.1
"""A machine is quiet while its processes use under this share of its cores."""


def run(runs: int = 3, args=(), wait_s: float = 600, attempts: int = 3) -> dict:
    """Times `compat-grads check --quiet --json *args` until `runs` runs were quiet (other
    processes used under `QUIET` of the cores meanwhile), at most `runs * attempts` runs,
    one after another, each after waiting up to `wait_s` seconds for a quiet machine
    (`wait_for_quiet`).

    Returns {"command", "runs": [{"wall_s", "user_s", "sys_s", "cpu_s", "others_cpu_s",
    "quiet", "load", "status", "summary"}] (every run, quiet or not), "median_wall_s",
    "max_wall_s" (of the quiet runs; of all where none was), "cores"}. Raises RuntimeError
    if a run fails (a non-zero exit status).
    """
    out = []
    while sum(r["quiet"] for r in out) < runs and len(out) < runs * attempts:
        wait_for_quiet(wait_s)
        out.append(time_check(args)[0])
    walls = [r["wall_s"] for r in out if r["quiet"]] or [r["wall_s"] for r in out]
    return {"command": " ".join((*COMMAND, *args)), "runs": out,
            "median_wall_s": statistics.median(walls), "max_wall_s": max(walls),
            "cores": os.cpu_count()}


def time_check(args=()) -> tuple:
    """One run of `compat-grads check --quiet --json *args` in a fresh process: ({"wall_s",
    "user_s", "sys_s", "cpu_s", "load", "status", "summary"}, the check's JSON report)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = busy_cpu_s()
    started = time.monotonic()
    # a new user's environment: the kernels TensorFlow picks, whatever the bench pinned
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    done = subprocess.run([sys.executable, "-m", "compat_grads", *COMMAND[1:], "--quiet",
                           "--json", *args], capture_output=True, text=True, env=env)
    wall, others = time.monotonic() - started, busy_cpu_s() - busy
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(COMMAND)} exited with {done.returncode}: "
                           f"{done.stderr.strip()[-2000:]}")
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    report = json.loads(done.stdout)
    others = max(0.0, others - user - system)
    return {"wall_s": wall, "user_s": user, "sys_s": system, "cpu_s": user + system,
            "others_cpu_s": others, "quiet": not others >= QUIET * wall * os.cpu_count(),
            "load": load, "status": done.returncode, "summary": report["summary"]}, report


def busy_cpu_s() -> float:
    """The CPU seconds all processes of the machine have used since it started (user,
    nice, system, interrupts; /proc/stat), or NaN where there is no /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(wait_s: float, sample_s: float = 3.0) -> bool:
    """Waits until the machine's processes used under `QUIET` of its cores over
    `sample_s`, at most `wait_s` seconds; whether it became quiet."""
    if wait_s <= 0 or math.isnan(busy_cpu_s()):
        return True
    deadline = time.monotonic() + wait_s
    while True:
        busy = busy_cpu_s()
        time.sleep(sample_s)
        if busy_cpu_s() - busy < QUIET * sample_s * os.cpu_count():
            return True
        if time.monotonic() >= deadline:
            return False


def markdown(report: dict) -> str:
    lines = [f"| first run: {report['command']} | wall s | CPU s (user + sys) | "
             "other processes' CPU s meanwhile | quiet | load |", "|---|---|---|---|---|---|"]
    lines += [f"| run {k} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['others_cpu_s']:.1f} | "
              f"{'yes' if r['quiet'] else 'no'} | {r['load']:.2f} |"
              for k, r in enumerate(report["runs"], 1)]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    check_args = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__)
    parser.add_argument("runs", type=int, nargs="?", default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the runs there")
    args = parser.parse_args(argv[:len(argv) - len(check_args) - ("--" in argv)])
    report = run(args.runs, check_args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
