"""The per-example workloads again with TensorFlow's oneDNN kernels, in a process of their
own: `python -m compat_grads.bench.onednn BATCH REPEATS` (the suite sets
TF_ENABLE_ONEDNN_OPTS=1 for it); prints one JSON line (`main`).

TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when it loads, and turns oneDNN on by default
on x86 CPUs with AVX-512 VNNI and later (TensorFlow 2.9's release notes), so many users run
these kernels without asking. The suite runs with them off (tox's setting, which keeps
graph and function values equal bit for bit; on an AVX2 machine also TensorFlow's
default). The kernels change what each recipe costs: with them, TensorFlow's `while_loop`
over `Conv2DBackpropFilter` in `vectorized_map` runs each example through oneDNN's filter
gradient, which costs far more per call than Eigen's.
"""

import dataclasses
import json
import os
import subprocess
import sys

from compat_grads.bench import workloads

KINDS = ("MLP", *workloads.CNN_KINDS)


def kernels_on() -> bool:
    """Whether this process's TensorFlow runs oneDNN's kernels (as it loaded; the
    variable's value where a TensorFlow lacks the function that says so)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "1"


def by_default() -> bool:
    """Whether TensorFlow runs oneDNN's kernels on this machine when nobody asks (a fresh
    process without TF_ENABLE_ONEDNN_OPTS): the kernels its users get."""
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    done = subprocess.run([sys.executable, "-c", "from compat_grads.bench import onednn; "
                           "print(onednn.kernels_on())"], capture_output=True, text=True,
                          env=env, check=True, timeout=600)
    return done.stdout.split()[-1] == "True"


def main(argv):
    """Prints {"kernels": whether TensorFlow runs oneDNN's kernels here, "measures": the
    workloads' measures, none where it does not (a machine without them: not x86)}."""
    batch, repeats = int(argv[0]), int(argv[1])
    asked = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    if asked != "1":
        raise SystemExit("compat_grads.bench.onednn: set TF_ENABLE_ONEDNN_OPTS=1 before "
                         f"running it (got {asked!r}): TensorFlow reads it once, when it "
                         "loads")
    kernels = kernels_on()
    measures = [m for kind in KINDS if kernels
                for m in workloads.per_example(kind, batch, repeats, onednn=True)]
    print(json.dumps({"kernels": kernels,
                      "measures": [dataclasses.asdict(m) for m in measures]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
