"""Private training: each example's gradient norm and the sum of clipped per-example
gradients, from each weight's uses in the forward graph (its layer's inputs and output
gradients) without the per-example gradients themselves.

`uses` finds where the forward pass reads each weight; `factors` holds what a rule gives for
one use (an outer-product factor or a per-example gradient) and the math on it (norms by
Gram matrices or by materializing, whichever is smaller; clipped sums); one module per kind
of layer holds its rules (`contractions`: Dense, EinsumDense, attention; `convolutions`;
`embeddings`; `elementwise`: biases and normalizations), `rules` is their registry, and
`ghost` runs them over a model's forward pass. What no rule knows is left to the caller
(`compat_grads._src.call.specs_dp`), which materializes those weights' per-example gradients.
"""
