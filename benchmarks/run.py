"""The benchmark suite, from a checkout: `python benchmarks/run.py [--quick] [--out DIR]`.

The same as `compat-grads bench`. Install the `bench` extra for the plot (matplotlib) and,
optionally, JAX for its columns. Results: a markdown table on stdout, DIR/bench.json and
DIR/tf1_graph.png. Run it on a quiet machine; the ratios are what to read, not the times.
"""

import sys

from compat_grads.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
