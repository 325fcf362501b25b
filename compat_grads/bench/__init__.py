"""`compat-grads bench`: compat_grads against the recipes users write and TensorFlow's best,
side by side in one run. Ratios are `their time / our time` (above 1: we are faster).

The suite is `compat_grads.bench.suite` (`run`, `bench`); this package imports nothing heavy,
so that the command line can list its options without loading TensorFlow.
"""


from compat_grads._src.console import quiet as _quiet


def add_arguments(parser) -> None:
    """The options of `compat-grads bench` (and `python benchmarks/run.py`)."""
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks it runs")
    parser.add_argument("--out", default="bench-results", help="folder for JSON and PNG")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--distribute", type=int, metavar="N", default=0,
                        help="instead: the tall Jacobian on N logical CPU devices next to "
                        "one device (times, and peak memory per device)")
    parser.add_argument("--traces", action="store_true",
                        help="instead: per-sample Laplacians and divergences of an MLP "
                        "against the recipes users write (nested tapes, Hessian + trace, "
                        "TF1 loop, DeepXDE, JAX, folx), with the memory peak")
    parser.add_argument("--private", action="store_true",
                        help="instead: a private training step (clipped_gradients) against "
                        "the non-private step and the per-example recipes, time and peak "
                        "memory, on four models")
    parser.add_argument("--curvature", action="store_true",
                        help="instead: Hessian-vector products against one gradient and "
                        "nested tapes, Lanczos and Hutchinson on a CNN's Hessian, the top "
                        "eigenvalue's peak memory, the empirical NTK against "
                        "GradientTape.jacobian and JAX")
    parser.add_argument("--json", metavar="FILE",
                        help="with --traces, --private or --curvature: write the raw numbers "
                        "there (default: OUT/traces.json, OUT/private.json or "
                        "OUT/curvature.json)")
    _quiet.add_argument(parser)
