"""compat_grads in typed code: `mypy --strict examples/typed_usage.py` (tox's lint) checks
these calls against the public signatures, so a wrong option (`strategy="backward"`, a
misspelt keyword) is an error before anything runs. The file also runs: `python
examples/typed_usage.py` prints the shapes."""

from __future__ import annotations

import tensorflow as tf

import compat_grads as cg


def u(xy: tf.Tensor) -> tf.Tensor:
    """3x²y + y² per sample."""
    return 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2


def derivatives(xy: tf.Tensor) -> dict[str, tf.Tensor]:
    """Every family once, with options a type checker holds to their Literal values."""
    return {
        "jacobian": cg.stacked_jacobian(u, xy, strategy="reverse"),
        "per_element": cg.per_element_gradients(u, xy),
        "batch_jacobian": cg.batch_jacobian(lambda x: tf.sin(x), xy, strategy="forward"),
        "batch_hessian": cg.batch_hessian(u, xy, unconnected_gradients="zero"),
        "hessian_diagonal": cg.batch_hessian_diagonal(u, xy, chunk_size="auto"),
        "laplacian": cg.batch_laplacian(u, xy, method="exact"),
        "divergence": cg.batch_divergence(lambda x: tf.tanh(x), xy),
        "hvp": cg.hvp(lambda x: tf.reduce_sum(u(x)), xy, tf.ones_like(xy)),
    }


def main() -> None:
    xy = tf.constant([[-6.0, -3.0], [1.0, 8.0]])
    for name, value in derivatives(xy).items():
        print(name, tuple(value.shape), cg.execution_mode())


if __name__ == "__main__":
    main()
