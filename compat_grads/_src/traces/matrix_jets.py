"""The forward Laplacian's rules for matrix functions
(`compat_grads._src.traces.forward_laplacian`):
log-determinants, determinants, inverses and solves, the ops a wavefunction's Slater
determinant and a Gaussian's log-likelihood run, and the contractions of `tf.einsum`.

Each rule works on the op's input matrices A (`[..., m, m]`) with their jets J (`[n] +
A.shape`: the derivative along each of n directions) and S (the second derivative, summed
over the directions or one per direction), through the matrix calculus of the inverse:
d(A⁻¹) = -A⁻¹ dA A⁻¹. Products with A⁻¹ broadcast over the directions' axis (one inverse,
not n). As TensorFlow's own gradients of these ops, they need A invertible.
"""

from __future__ import annotations

import string

from compat_grads._src.core.tf import tf
from compat_grads._src.traces.linear_jets import named, rank_of, unsupported


def _matrix_jet(walk, jet, a, adjoint=False):
    """(J, S) of matrix a, materialised to its shape (a matrix product needs the full
    rows and columns), transposed with `adjoint` (real matrices: A^H is Aᵀ); (None, None)
    where a is not on the path."""
    if jet is None:
        return None, None
    J, S = walk.full(jet[0], a, True), None
    if jet[1] is not None:
        S = walk.full(jet[1], a, not walk.summed)
    if adjoint:
        J, S = (None if x is None else tf.linalg.matrix_transpose(x) for x in (J, S))
    return J, S


def _trace_of_square(M):
    """tr(M M) over the last two axes: Σ_ij M_ij M_ji."""
    return tf.reduce_sum(M * tf.linalg.matrix_transpose(M), [-2, -1])


def _log_determinant_jet(walk, a, jet):
    """The jet of log|det A|: J_k = tr(A⁻¹ J_k), S = tr(A⁻¹ S_A) - Σ_k tr((A⁻¹ J_k)²)."""
    J, S = _matrix_jet(walk, jet, a)
    inverse = tf.linalg.inv(a)
    M = tf.linalg.matmul(inverse, J)  # [n, ..., m, m]
    if not walk.second:
        return tf.linalg.trace(M), None
    second = -walk.cross(_trace_of_square(M))
    if S is not None:
        second = second + tf.linalg.trace(tf.linalg.matmul(inverse, S))
    return tf.linalg.trace(M), second


def log_determinant(walk, op, jets):
    """LogMatrixDeterminant (`tf.linalg.slogdet`): the sign is piecewise constant (no
    derivative, as in `tf.gradients`), log|det A| carries the jet."""
    return [None, _log_determinant_jet(walk, op.inputs[0], jets[0])]


def determinant(walk, op, jets):
    """MatrixDeterminant: det A = ±exp(log|det A|), so J = det·J_L and S = det·(S_L + J_L²)."""
    y = op.outputs[0]
    return walk.chain(_log_determinant_jet(walk, op.inputs[0], jets[0]), y, y, rank_of(y))


def inverse(walk, op, jets):
    """MatrixInverse, B = A⁻¹: J_B = -B J_A B, S_B = -B S_A B + 2 Σ_k (B J_k)² B."""
    B = op.outputs[0]
    J, S = _matrix_jet(walk, jets[0], op.inputs[0], op.get_attr("adjoint"))
    P = tf.linalg.matmul(B, J)  # [n, ..., m, m]
    first = -tf.linalg.matmul(P, B)
    if not walk.second:
        return first, None
    second = 2 * tf.linalg.matmul(walk.cross(tf.linalg.matmul(P, P)), B)
    if S is not None:
        second = second - tf.linalg.matmul(tf.linalg.matmul(B, S), B)
    return first, second


def solve(walk, op, jets):
    """MatrixSolve, X = A⁻¹ R: J_X = A⁻¹ (J_R - J_A X), S_X = A⁻¹ (S_R - S_A X - 2 Σ_k J_A,k
    J_X,k)."""
    (a, rhs), X = op.inputs, op.outputs[0]
    Ja, Sa = _matrix_jet(walk, jets[0], a, op.get_attr("adjoint"))
    Jr, Sr = _matrix_jet(walk, jets[1], rhs)
    inverse_a = tf.linalg.inv(tf.linalg.matrix_transpose(a) if op.get_attr("adjoint") else a)
    inner = _minus(Jr, None if Ja is None else tf.linalg.matmul(Ja, X))
    first = tf.linalg.matmul(inverse_a, inner)
    if not walk.second:
        return first, None
    inner = _minus(Sr, None if Sa is None else tf.linalg.matmul(Sa, X))
    if Ja is not None:
        inner = _minus(inner, 2 * walk.cross(tf.linalg.matmul(Ja, first)))
    return first, None if inner is None else tf.linalg.matmul(inverse_a, inner)


def _minus(a, b):
    return a if b is None else -b if a is None else a - b


def einsum(walk, op, jets):
    """tf.einsum of one operand (linear) or two (bilinear: J = J_a b + a J_b, S = S_a b +
    a S_b + 2 Σ_k J_a,k J_b,k): the same contraction, an operand's directions on a letter of
    their own, kept first in the result."""
    equation = op.get_attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    if "->" not in equation or len(op.inputs) > 2:
        raise unsupported(f"{named(op)} with an implicit output or more than two operands")
    letters, output = equation.replace(" ", "").split("->")
    letter = next(c for c in string.ascii_letters if c not in equation)

    def contract(*operands):  # (tensor, carries the n axis)
        if any(x is None for x, _ in operands):
            return None
        subscripts = [(letter if n else "") + sub
                      for (_, n), sub in zip(operands, letters.split(","))]
        out = (letter if any(n for _, n in operands) else "") + output
        return tf.einsum(f"{','.join(subscripts)}->{out}", *(x for x, _ in operands))
    own = not walk.summed
    pairs = [_matrix_jet(walk, jet, x) for jet, x in zip(jets, op.inputs)]
    if len(op.inputs) == 1:
        (J, S), = pairs
        return contract((J, True)), contract((S, own))
    (a, b), ((Ja, Sa), (Jb, Sb)) = op.inputs, pairs
    J = _plus(contract((Ja, True), (b, False)), contract((a, False), (Jb, True)))
    if not walk.second:
        return J, None
    both = contract((Ja, True), (Jb, True))
    S = _plus(contract((Sa, own), (b, False)), contract((a, False), (Sb, own)))
    return J, _plus(S, None if both is None else 2 * walk.cross(both))


def matmul(walk, op, jets):
    """MatMul and BatchMatMul: bilinear, as `walk.bilinear` computes it."""
    flags = ("transpose_a", "transpose_b") if op.type == "MatMul" else ("adj_x", "adj_y")
    ta, tb = (op.get_attr(flag) for flag in flags)

    def product(x, y):
        if x.shape.rank is not None and x.shape.rank >= 3 and y.shape.rank == 2 and not ta:
            return _flat_matmul(x, y, tb)
        return tf.linalg.matmul(x, y, transpose_a=ta, transpose_b=tb)
    a, b = op.inputs[:2]
    # A lazily broadcast jet (a size-one axis) works where the product broadcasts, the left
    # operand's rows; an axis the product contracts needs its full size.
    jets = [_full_jet(walk, jets[0], a, keep_rows=not ta), _full_jet(walk, jets[1], b, False)]
    return walk.bilinear(product, a, b, jets, rank_of(op.outputs[0]))


def _full_jet(walk, jet, like, keep_rows):
    """`jet` broadcast to `like`'s shape (J with its n axis, S with it unless summed), where
    it is not already, unless it may stay lazy (`keep_rows`: S summed still made full)."""
    if jet is None:
        return None
    J, S = jet
    if not keep_rows:
        J = walk.full(J, like, True)
    if S is not None and (walk.summed or not keep_rows):
        S = walk.full(S, like, not walk.summed)
    return J, S


def _flat_matmul(x, y, transpose_b):
    """[n, ..., m, k] @ [k, h] as one 2-D product of [n ... m, k]: a broadcast batch of small
    products is several times slower (Eigen's kernels: 4.6 ms against 0.7 for the
    [10, 128, 10, 64] @ [64, 32] of a wavefunction's tangents)."""
    shape = tf.shape(x)
    flat = tf.linalg.matmul(tf.reshape(x, [-1, shape[-1]]), y, transpose_b=transpose_b)
    return tf.reshape(flat, tf.concat([shape[:-1], tf.shape(flat)[1:]], 0))


def _plus(a, b):
    return b if a is None else a if b is None else a + b


RULES = {"LogMatrixDeterminant": log_determinant, "MatrixDeterminant": determinant,
         "MatrixInverse": inverse, "MatrixSolve": solve, "Einsum": einsum}
