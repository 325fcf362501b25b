"""The registry of layer rules: which rule reads a weight's use, by the op that reads it.
One place: the docs' table of layers with rules is generated from `LAYERS`."""

from __future__ import annotations

from compat_grads._src.dp import contractions, convolutions, elementwise, embeddings

RULES = {
    "MatMul": contractions.matmul,
    "BatchMatMul": contractions.matmul,
    "BatchMatMulV2": contractions.matmul,
    "Einsum": contractions.einsum,
    "Conv2D": convolutions.conv,
    "Conv3D": convolutions.conv,
    "DepthwiseConv2dNative": convolutions.conv,
    "Conv2DBackpropInput": convolutions.transposed,
    "Conv3DBackpropInputV2": convolutions.transposed,
    "GatherV2": embeddings.gather,
    "ResourceGather": embeddings.gather,
    "BiasAdd": elementwise.broadcast,
    "Add": elementwise.broadcast,
    "AddV2": elementwise.broadcast,
    "Sub": elementwise.broadcast,
    "Mul": elementwise.broadcast,
    "FusedBatchNormV3": elementwise.fused_batch_norm,
    "FusedBatchNorm": elementwise.fused_batch_norm,
    "FusedBatchNormV2": elementwise.fused_batch_norm,
}
"""op type -> `rule(use, output gradient, context)` -> `Outer`, `PerExample`, or a string
saying why it does not apply."""

LAYERS = (
    ("Dense, EinsumDense (inputs of any rank)", "MatMul, BatchMatMulV2, Einsum"),
    ("MultiHeadAttention (its projections)", "Einsum, BatchMatMulV2"),
    ("Conv1D, Conv2D, Conv3D (strided, dilated, grouped)", "Conv2D, Conv3D"),
    ("DepthwiseConv2D, SeparableConv1D/2D", "DepthwiseConv2dNative, Conv2D"),
    ("Conv1DTranspose, Conv2DTranspose, Conv3DTranspose",
     "Conv2DBackpropInput, Conv3DBackpropInputV2"),
    ("Embedding (tied or not)", "GatherV2, ResourceGather"),
    ("LayerNormalization, BatchNormalization in inference mode",
     "Mul, AddV2, FusedBatchNormV3"),
    ("LSTM, GRU, SimpleRNN, Bidirectional (unrolled while the step is built)",
     "MatMul, BiasAdd per time step"),
    ("biases and scales of any layer", "BiasAdd, Add, Sub, Mul"),
)
"""The layers the rules cover and the ops they read, for the docs."""


def rule_for(use):
    """The rule for `use`, or None."""
    return RULES.get(use.op.type)
