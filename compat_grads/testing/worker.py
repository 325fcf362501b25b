"""The TF1 side of the matrix, in its own process: `python -m compat_grads.testing.worker
OUT IDS [--bitwise] ROUTE...` disables v2 behaviour, runs the listed items on the TF1 routes
and pickles {item id: {route: Result}} to OUT."""

import argparse
import pickle
import sys

from compat_grads._tf import tf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("ids")
    parser.add_argument("routes", nargs="+")
    parser.add_argument("--bitwise", action="store_true")
    args = parser.parse_args(argv)
    tf.compat.v1.disable_v2_behavior()
    from compat_grads.testing import matrix, routes, tolerances

    if args.bitwise:
        tolerances.pin_runtime_for_bitwise()
    with open(args.ids) as handle:
        wanted = set(handle.read().split())
    results = {item.id: {route: routes.run(item, route) for route in args.routes
                         if item.applies(route)}
               for item in matrix.items() if item.id in wanted}
    with open(args.out, "wb") as handle:
        pickle.dump(results, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
