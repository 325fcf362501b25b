"""When rows run vectorized (pfor) and when one by one: the static rule `strategy="auto"`
and the migration helpers follow (measured in docs/performance.rst, "When compat_grads
vectorizes"; `python -m compat_grads.bench.routes` measures it again).

pfor computes every row at once, so each per-row intermediate becomes one tensor `rows` times
larger. That wins while a row's work is small next to the cost of running its ops (the loop
is then mostly overhead) and loses once a row's intermediates are large: the stacked tensors
no longer fit in cache and pfor adds Transposes and Tiles of them, while the loop runs each
row's ops at full speed on data that fits. pfor also loses at every size through convolutions
and pooling, whose converters tile the loop-invariant activations once per row, and
through TF2 loops, which it converts by tracing their bodies again.

The rule reads only what is known while the graph is built: the row count, the sizes and
the op types of the graph the rows differentiate. Never timings, nor this machine's cores or
cache: a graph behaves the same wherever it is built and run (a TF1 port's two processes
included).
"""

from __future__ import annotations

import dataclasses

from compat_grads._src.core.graph_walk import between, op_of
from compat_grads._src.core.python_ops import loop_inside
from compat_grads._src.core.tf import tf

ROW_BYTES = 256 * 2**10
"""A row whose intermediates take more than this runs one by one (measured: rows of 60 and
90 KiB win vectorized, 2 to 4 times; rows of 300 and 530 KiB lose, 1.4 and 2.7 to 5.9
times, and in chunks too)."""

GRADIENT_ROWS = (64 * 2**10, 4 * 2**20)
"""Large rows that differentiate a gradient (a Hessian's, a per-sample Hessian's, in either
direction) run vectorized while one row's largest tensor takes more than the first and the
rows' largest tensors together (rows x largest) at most the second. Measured
(`python -m compat_grads.bench.second_order_rows`: per-sample Hessians of tanh MLPs, 19
sizes, each in a fresh process and in one that ran other workloads first): inside the
window, after other work, vectorized rows ran 0.95 to 1.55 times the speed of separate
passes (median 1.22), which ran 0.71 to 1.05 times that of nested tapes + batch_jacobian
(median 0.89); in a fresh process 0.75 to 1.09 (median 0.96), with the rule's plan 0.96 to
1.43 times nested tapes' speed. Below it (rows' tensors of 64 KiB or less) and above it
(8 MiB together and more) separate passes won in both states (a median 1.4 and 1.2 times)."""

FEW_ROWS = 16
"""Rows run one by one are separate reverse passes up to this many (a graph of that many
gradients, as the legacy Python loop built), a while_loop beyond."""

LOOP_ROWS = 8
"""The migration helpers (`compat_grads.migrate`: `gradient_rows`, `row_while_loop`,
`gradient_map_fn`) keep the loop they replace for this many rows or fewer, known while
building. Measured (TF1 graph, Jacobians of 2-layer ReLU MLPs, batch 1-256, width 16-256,
min of 2 builds, median of 50 runs): with 4 to 8 rows, vectorized rows ran 0.59 to 1.38
times the loop's speed (about 1 in the median) and took 1.3 to 2.6 times its build
(pfor's conversion, about 55 ms, against about 5.5 ms a row); with 10 rows the build is the
same. A program switched to the helpers builds no slower, and runs as fast."""

UNKNOWN_DIM = 128
"""What a dimension unknown while building counts as (a placeholder's None batch): a
typical batch."""

ONE_BY_ONE_OPS = frozenset({
    "Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput",
    "Conv2DBackpropFilter", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    "MaxPool", "MaxPoolV2", "MaxPool3D", "MaxPoolGrad", "MaxPoolGradV2", "MaxPool3DGrad",
    "AvgPool", "AvgPool3D", "AvgPoolGrad", "AvgPool3DGrad"})
"""Ops through which vectorized rows lose at every row count and size measured."""

LOOP_OPS = frozenset({"While", "StatelessWhile"})
"""TF2 loops (tf.while_loop, tf.foldl, tf.scan): pfor converts one by tracing its body again
through AutoGraph, seconds per loop while building (a second-order batch_jacobian through
tf.foldl: 37 s to trace vectorized, 4 s in a while_loop, which also runs faster). Always a
while_loop: separate passes would trace the loop's gradient once per row."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """How rows run: `vectorized` (all at once), or one by one (`separate` reverse passes,
    else a while_loop). Never in chunks of its own: chunks measured no faster than all rows
    at once, and as much as 1.5 times slower (forward mode); `chunk_size` bounds memory."""

    vectorized: bool
    separate: bool = False


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the rule reads: bytes of one row's intermediates (None: unknown), op types, and
    bytes of the largest of them (None: unknown)."""

    row_bytes: int | None
    kinds: frozenset
    largest: int | None = None


def plan(rows, facts: Facts, xla: bool = False, through_gradient: bool = False) -> Plan:
    """The plan for `rows` rows (an int, or None when only known at run time); `xla`: the
    graph is compiled by XLA, which fuses the vectorized rows' ops, while its while_loop runs
    the rows one after another (so large rows stay vectorized there); `through_gradient`:
    the rows differentiate a gradient (`GRADIENT_ROWS`)."""
    if facts.kinds & LOOP_OPS:  # one trace in a while_loop, not one per separate pass
        return Plan(False)
    if facts.kinds & ONE_BY_ONE_OPS:
        return _one_by_one(rows)
    large = (facts.row_bytes or 0) > ROW_BYTES and not xla
    if large and not (through_gradient and _mid_sized(rows, facts.largest)):
        return _one_by_one(rows)
    return Plan(True)


def _one_by_one(rows) -> Plan:
    return Plan(False, separate=isinstance(rows, int) and rows <= FEW_ROWS)


def _mid_sized(rows, largest) -> bool:
    """Whether rows through a gradient stay vectorized although large (`GRADIENT_ROWS`)."""
    low, high = GRADIENT_ROWS
    return isinstance(rows, int) and largest is not None and largest > low \
        and rows * largest <= high


def graph_facts(targets, sources) -> Facts:
    """The facts of the graph between `sources` and `targets`: a row's reverse (or forward)
    pass makes one tensor like each float tensor that depends on the sources. Unknown for
    eager tensors."""
    return path_facts(targets, lambda: between(targets, sources))


def path_facts(targets, path_ops) -> Facts:
    """`graph_facts` from `path_ops()`, the ops between the sources and `targets` (a
    backend's own walk, which sees the sources as tf.gradients does)."""
    if not all(op_of(t) is not None for t in targets):
        return Facts(None, frozenset())
    return ops_facts(path_ops())


def ops_facts(ops) -> Facts:
    """The facts of the ops one row runs (or its forward pass), constants left out. A loop
    inside a function an op calls counts as a loop of the row (a Keras LSTM or GRU layer
    runs its tf.while_loop in a function of its own: pfor converts it just as slowly; a
    batch_jacobian through an LSTM built in 2.7-2.9 s vectorized, 0.73-0.76 s in a
    while_loop, which then ran in 4.0 ms against 3.5 for 8 samples, 4.1 against 6.2 for
    64)."""
    ops = [op for op in ops if op.type != "Const"]
    sizes = [_bytes(t) for op in ops for t in op.outputs if t.dtype.is_floating]
    kinds = {op.type for op in ops}
    if not kinds & LOOP_OPS and loop_inside(ops) is not None:
        kinds |= LOOP_OPS
    return Facts(sum(sizes), frozenset(kinds), max(sizes, default=0))


def _bytes(tensor) -> int:
    if tensor.shape.rank is None:
        return UNKNOWN_DIM * tensor.dtype.size
    count = 1
    for dim in tensor.shape.as_list():
        count *= UNKNOWN_DIM if dim is None else dim
    return count * tensor.dtype.size


def intermediates(backend, passes=1):
    """Bytes one row's intermediates take: a tensor like each float tensor on the path
    between the backend's sources and targets, `passes` times (2 for a second-order row,
    which runs through the gradient's graph too); None for eager tensors (unknown)."""
    row_bytes = path_facts(backend.targets, backend.path_ops).row_bytes
    return None if row_bytes is None else passes * row_bytes


def plan_for(rows, targets, sources) -> Plan:
    """The plan for `rows` rows of the derivative of `targets` by `sources`."""
    return plan(rows, graph_facts(targets, sources))


def new_ops(run):
    """`run()`'s value and the ops it added to the default graph."""
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    value = run()
    return value, graph.get_operations()[before:]
