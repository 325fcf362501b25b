"""How many of the forward walk's n directions go through the graph at once (a chunk), and
the chunks of a walk made one after another (`forward_laplacian`)."""

from __future__ import annotations

from compat_grads._src.core import graph_walk as _graph_walk
from compat_grads._src.traces.linear_jets import size_of, value_of

__all__ = ["WALKS", "chunk_and_n", "default_chunk", "in_chunks"]


def default_chunk(target, source, batched):
    """The directions a step of `forward_laplacian.propagate`'s loop takes by default, or
    None for all n."""
    return chunk_and_n(target, source, batched, None, looped=True)[0]


def chunk_and_n(target, source, batched, chunk, looped=False):
    """(directions per walk, n), or (None, n) for one walk of all n (`looped`: in a loop)."""
    n = size_of(source, batched)
    if n is not None and chunk is None:
        chunk = at_once(_graph_walk.between([target], [value_of(source)]), n, looped)
    if chunk is None or n is None or chunk >= n:
        return None, n
    return -(-n // -(-n // chunk)), n  # as many chunks, evened out: the fewest padded


def in_chunks(n, chunk, part):
    """`part((lo, hi), after)` for each chunk of the n directions, in order, each made after
    the part before it (`after`: its result), so that one chunk is in flight at a time."""
    parts = []
    for lo in range(0, n, chunk):
        parts.append(part((lo, min(lo + chunk, n)), [p for p in parts[-1:] if p is not None]))
    return parts


# Directions in flight by default: as many as keep the largest J on the path within
# _CHUNK_BYTES; walks one after another (`forward_laplacian.reduced_tangents`: copies of
# the target's ops) in at most WALKS walks, a loop's steps (`forward_laplacian.propagate`)
# however many: memory grows with b.
_CHUNK_BYTES, WALKS = 4 * 2 ** 20, 16


def at_once(ops, n, looped=False):
    """The directions of one walk: None (all n) where a tensor's size is unknown."""
    sizes = [(t.shape.num_elements(), t.dtype.size) for op in ops for t in op.outputs
             if t.dtype.is_floating]
    if not sizes or any(elements is None for elements, _ in sizes):
        return None
    chunk = max(1, _CHUNK_BYTES // max(1, max(e * size for e, size in sizes)))
    return chunk if looped else max(chunk, -(-n // WALKS))
