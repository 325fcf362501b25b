"""The sizes of the suite's workloads: `FULL` for the bench, `QUICK` to check it runs."""

FULL = {"tall": (4000, 500), "wide": (100, 5000), "square": 256, "batch": (128, 32),
        "hessians": [(1024, 8), (1024, 32)], "tf1_sizes": [200, 500, 1000, 2000, 4000],
        "loop_max": 1000, "memory": (20000, 2000, 100, 100), "repeats": 15,
        "per_example": 256, "cnn": 64, "bigger": (500000, 1500, 16, 0)}
QUICK = {"tall": (40, 5), "wide": (5, 40), "square": 8, "batch": (4, 6),
         "hessians": [(8, 3)], "tf1_sizes": [20, 40], "loop_max": 40,
         "memory": (400, 40, 100, 10), "repeats": 2, "per_example": 4,
         "cnn": 4, "bigger": (2000, 50, 16, 2000000)}
"""`bigger`: M, N, HIDDEN and BUDGET of `compat_grads.bench.bigger` (FULL: a 3 GB result
whose all-at-once estimate is about twice this machine's memory, with the default budget;
QUICK: a small one with a budget that makes it chunk)."""

__all__ = ["FULL", "QUICK"]
