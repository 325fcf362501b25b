"""The guide's PINN example ("Laplacians, diagonals and traces"): its code blocks as both
suites run them, and the residual's oracle, forward-mode derivatives of the network written
out in numpy (float64)."""

from __future__ import annotations

import re

import numpy as np


def blocks(page, title):
    """The python code blocks of the section `title` of the docs page `page` (a path: the
    suites pass their checkout's docs/traces.rst; an installed package has no docs),
    unindented."""
    text = page.read_text()
    start = text.index(f"\n{title}\n")
    end = re.search(r"\n[^\n]+\n-{4,}\n", text[start + len(title) + 2:])
    section = text[start:] if end is None else text[start:start + len(title) + 2 + end.start()]
    found = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)
    assert found, f"no python example under {title!r}"
    return ["\n".join(line[3:] for line in block.splitlines()) for block in found]


def burgers_residual(points, w1, w2, w3, nu):
    """u_t + u u_x - nu u_xx of `u = tanh(tanh(z w1) w2) w3`, each derivative pushed forward
    along its one-hot direction by hand."""
    h1 = np.tanh(points @ w1)
    h2 = np.tanh(h1 @ w2)
    value = (h2 @ w3)[:, 0]
    first, second = [], []
    for j in range(points.shape[1]):
        da1 = np.broadcast_to(w1[j], h1.shape)
        dh1 = (1 - h1 ** 2) * da1
        d2h1 = -2 * h1 * (1 - h1 ** 2) * da1 ** 2
        da2, d2a2 = dh1 @ w2, d2h1 @ w2
        dh2 = (1 - h2 ** 2) * da2
        d2h2 = (1 - h2 ** 2) * d2a2 - 2 * h2 * (1 - h2 ** 2) * da2 ** 2
        first.append((dh2 @ w3)[:, 0])
        second.append((d2h2 @ w3)[:, 0])
    return first[1] + value * first[0] - nu * second[0]
