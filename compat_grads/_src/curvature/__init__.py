"""Curvature without the matrix: the curvature operators and the estimators on any square
`tf.linalg.LinearOperator`.

`operators` builds the Hessian, the generalized Gauss-Newton and the Fisher as operators over
the flattened parameters, their products from the backends' VJPs and JVPs (the reason this
folder sits just above `backends/`); `flat` holds their operator class, the parameters'
layout and the sum over a Dataset's batches, `losses` the losses known in closed form.
`checks` holds the argument checks every estimator shares, `probes` the stateless random
vectors, `lanczos` the extreme eigenpairs, `trace` Hutchinson's and Hutch++'s traces and the
diagonal, `solve` conjugate gradients. Each estimator asks the operator for products only
(`matvec` / `matmul`), so an operator whose products are Hessian-vector products of a model
serves as well as a matrix.
"""
