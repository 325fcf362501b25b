"""(A + λI) x = b by conjugate gradients, from A's products alone.

The columns of b are solved side by side, one `op.matmul` per step for all of them, in one
`tf.while_loop`; a column stops moving once its residual |r| <= tol |b| (as the recurrence
measures r). CG needs A + λI positive definite: a search direction p with
pᵀ(A + λI)p <= 0 proves it is not, and stops the loop with an error that says so (in eager
code a ValueError; in a graph a failing assertion, TensorFlow's InvalidArgumentError with the
same message, when the solution is fetched).
"""

from __future__ import annotations

from compat_grads._src.core.checks import run_time_check
from compat_grads._src.core.errors import message
from compat_grads._src.core.mode import as_graph, runs_eagerly
from compat_grads._src.core.tf import tf
from compat_grads._src.curvature import checks, lanczos

FUNCTION = "solve"
ITERATIONS_PER_SIZE = 10
"""The default `max_iterations` is 10 n (scipy's `cg` default): n steps solve exactly in exact
arithmetic; rounding can need more on an ill-conditioned operator."""


def solve(op, rhs, damping, tol, max_iterations):
    """x, shaped like `rhs`, the arguments checked first. In eager code the loop runs in a
    one-off `tf.function` (`as_graph`): one program, the ops a graph runs."""
    n = checks.square_operator(FUNCTION, op)
    checks.self_adjoint(FUNCTION, op)
    rhs = checks.right_hand_side(FUNCTION, rhs, n, op.dtype)
    damping = checks.number(FUNCTION, "damping", damping, positive=False)
    tol = checks.number(FUNCTION, "tol", tol, positive=True)
    steps = checks.count(FUNCTION, "max_iterations", max_iterations,
                         "the most conjugate-gradient steps", none_ok=True)
    steps = ITERATIONS_PER_SIZE * n if steps is None else steps
    columns = rhs if rhs.shape.rank == 2 else rhs[:, None]
    x, broke = as_graph(lambda: conjugate_gradients(op, columns, damping, tol, steps))
    x = _unless_broken(x, broke, damping)
    return x if rhs.shape.rank == 2 else x[:, 0]


def _breakdown(damping: float) -> tuple:
    """(problem, fix) of a breakdown, in the words of `message`."""
    return (f"conjugate gradients broke down: op + damping * I is not positive definite (a "
            f"search direction p gave p^T (op + damping * I) p <= 0, with damping={damping})",
            "Pass a larger damping= (more than minus the smallest eigenvalue of op, which "
            "cg.top_eigenvalues(op, which='SA') estimates), or use a solver for indefinite "
            "systems.")


def _unless_broken(x, broke, damping):
    """x, once it is known that no step broke down: checked at once in eager code, as an
    assertion x waits for in a graph."""
    problem, fix = _breakdown(damping)
    if runs_eagerly():
        if bool(broke):
            raise ValueError(message(FUNCTION, problem, fix))
        return x
    guard = run_time_check(FUNCTION, problem, fix, tf.debugging.assert_equal, broke, False)
    with tf.control_dependencies([guard]):
        return tf.identity(x)


def conjugate_gradients(op, b, damping, tol, steps):
    """(x `[n, m]`, whether a step broke down) after at most `steps` steps from x = 0."""
    def product(p):
        return op.matmul(p) + damping * p if damping else op.matmul(p)

    def cross(u, v):
        return tf.reduce_sum(u * v, axis=0)

    squared = cross(b, b)
    bound = (tol * tol) * squared

    def step(i, x, r, p, rr, broke):
        active = rr > bound
        ap = product(p)
        curvature = cross(p, ap)
        broke = tf.reduce_any(active & (curvature <= 0))
        alpha = tf.where(active, rr / tf.where(active, curvature, tf.ones_like(rr)),
                         tf.zeros_like(rr))
        x, r = x + alpha * p, r - alpha * ap
        rr_next = cross(r, r)
        beta = tf.where(active, rr_next / tf.where(active, rr, tf.ones_like(rr)),
                        tf.zeros_like(rr))
        return i + 1, x, r, r + beta * p, rr_next, broke

    def going(i, x, r, p, rr, broke):
        return (i < steps) & tf.reduce_any(rr > bound) & tf.logical_not(broke)

    state = (tf.constant(0), tf.zeros_like(b), b, b, squared, tf.constant(False))
    _, x, _, _, _, broke = tf.while_loop(going, step, state, maximum_iterations=steps,
                                         parallel_iterations=lanczos.SEQUENTIAL)
    return x, broke
