"""The TF1 side of the matrix, in its own process: `python -m compat_grads.testing.worker
OUT IDS ROUTE...` disables v2 behaviour, runs the listed items on the TF1 routes and
pickles {item id: {route: Result}} to OUT."""

import pickle
import sys

from compat_grads._tf import tf


def main(argv=None) -> int:
    out, ids_file, *routes = (argv if argv is not None else sys.argv[1:])
    tf.compat.v1.disable_v2_behavior()
    from compat_grads.testing import matrix
    from compat_grads.testing import routes as route_module

    with open(ids_file) as handle:
        wanted = set(handle.read().split())
    results = {item.id: {route: route_module.run(item, route) for route in routes}
               for item in matrix.items() if item.id in wanted}
    with open(out, "wb") as handle:
        pickle.dump(results, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
