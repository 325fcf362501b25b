"""The TF1 side of a check, in its own process: `python -m compat_grads.testing.worker OUT
IDS [ROUTE...] [--models] [--bitwise]` disables v2 behaviour, runs the items whose ids are
listed in the file IDS (matrix items on the TF1 routes, or with `--models` the Keras model
items on the "tf1" route), prints `done <item id>` as each one finishes (for progress) and
pickles {item id: result} to OUT. Started by `compat_grads.testing.checks.TF1Process`."""

import argparse
import pickle
import sys

from compat_grads._tf import tf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("ids")
    parser.add_argument("routes", nargs="*")
    parser.add_argument("--models", action="store_true")
    parser.add_argument("--bitwise", action="store_true")
    args = parser.parse_args(argv)
    tf.compat.v1.disable_v2_behavior()
    tf.get_logger().setLevel("ERROR")
    from compat_grads.testing import tolerances

    if args.bitwise or args.models:
        tolerances.pin_runtime_for_bitwise()
    with open(args.ids) as handle:
        wanted = set(handle.read().split())
    results = {}
    for item, run in _work(args.models, args.routes):
        if item.id in wanted:
            results[item.id] = run(item)
            print("done", item.id, flush=True)
    with open(args.out, "wb") as handle:
        pickle.dump(results, handle)
    return 0


def _work(models, routes):
    """(item, item -> result) for every item of the chosen matrix."""
    if models:
        from compat_grads.testing import models as model_matrix

        return [(item, lambda i: model_matrix.run(i, "tf1")) for item in model_matrix.items()]
    from compat_grads.testing import matrix
    from compat_grads.testing import routes as route_runner

    def run(item):
        return {route: route_runner.run(item, route) for route in routes if item.applies(route)}
    return [(item, run) for item in matrix.items()]


if __name__ == "__main__":
    sys.exit(main())
