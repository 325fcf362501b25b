"""Curvature without the matrix: estimators on any square `tf.linalg.LinearOperator`.

`checks` holds the argument checks every estimator shares, `probes` the stateless random
vectors, `lanczos` the extreme eigenpairs, `trace` Hutchinson's and Hutch++'s traces and the
diagonal, `solve` conjugate gradients. Each asks the operator for products only
(`matvec` / `matmul`), so an operator whose products are Hessian-vector products of a model
serves as well as a matrix.
"""
