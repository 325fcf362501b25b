"""A process that runs matrix items for another one: `python -m compat_grads.testing.worker
OUT [ROUTE...] [--models] [--bitwise] [--tf2] [--calls]`.

It reads item ids from stdin, one a line, and runs each as it arrives: matrix items on the
given routes, or with `--models` the Keras model items. Without `--tf2` it disables v2
behaviour first and runs the TF1 routes; with `--tf2` it runs what the calling process runs
on the TF2 routes (the results and, for models, the oracle), to share that work. After each
item it prints `done <item id>`; at the end of its input it pickles {item id: result} to
OUT. With `--calls` it runs functions sent by `compat_grads.testing.remote` in a TF1
graph process instead, one request a line, until its input ends. Started by
`compat_grads.testing.checks.WorkerProcess`."""

import argparse
import pickle
import sys

from compat_grads._tf import tf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("routes", nargs="*")
    parser.add_argument("--models", action="store_true")
    parser.add_argument("--bitwise", action="store_true")
    parser.add_argument("--tf2", action="store_true")
    parser.add_argument("--calls", action="store_true")
    args = parser.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    if not args.tf2:
        tf.compat.v1.disable_v2_behavior()
    if args.calls:
        from compat_grads.testing import remote

        remote.serve(sys.stdin)
        return 0
    from compat_grads.testing import tolerances

    if args.bitwise or args.models:
        tolerances.pin_runtime_for_bitwise()
    by_id, run = _work(args.models, args.tf2, args.routes)
    results = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        item = by_id[line.strip()]
        results[item.id] = run(item)
        print("done", item.id, flush=True)
    with open(args.out, "wb") as handle:
        pickle.dump(results, handle)
    return 0


def _work(models, tf2, routes):
    """({item id: item}, item -> result) for the chosen matrix and side."""
    if models:
        from compat_grads.testing import models as model_matrix

        def run_model(item):
            return model_matrix.evaluate(item) if tf2 else model_matrix.run(item, "tf1")
        return {i.id: i for i in model_matrix.items()}, run_model
    from compat_grads.testing import checks, matrix

    return {i.id: i for i in matrix.items()}, lambda item: checks.run_routes(item, routes)


if __name__ == "__main__":
    sys.exit(main())
