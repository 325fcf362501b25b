"""A chunked Jacobian's peak memory stays near its result (issue 25): measured in a process of
its own (`python -m compat_grads.bench.memory`), where the peak resident set is this one
Jacobian's, on a result large enough (20000 x 2000 float32, 153 MB) to dominate TensorFlow's
own overhead."""

from compat_grads.bench.timing import in_subprocess


def test_forward_chunks_are_written_into_the_final_layout():
    # Stacking the columns first and then moving their axis last held two whole results
    # (2.25x here); written in place, the peak is the result plus one chunk (1.26-1.35x on
    # TF 2.21, 1.52 once on 2.12, whose runtime keeps more of its own). A chunk of 40 columns
    # keeps that chunk's intermediates (~4 x 40 x 20000 floats) small.
    measured = in_subprocess("compat_grads.bench.memory", [20000, 2000, "forward", 40],
                             timeout=300)
    assert measured["ratio"] <= 1.75, measured
