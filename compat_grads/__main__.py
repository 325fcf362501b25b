"""`python -m compat_grads check` is `compat-grads check`."""

import sys

from compat_grads.cli import main

if __name__ == "__main__":
    sys.exit(main())
