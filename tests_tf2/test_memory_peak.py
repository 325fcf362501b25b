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


def test_a_private_lstm_step_holds_at_most_1_6x_the_non_private_one():
    # The private training bench's embedding + LSTM (b=64, T=100), unrolled: each kernel's
    # hundred time steps are materialized in groups, each group added to the total as the
    # backward pass makes it (an add chain TensorFlow's graph optimizer would otherwise
    # turn into one AddN waiting for every step: 14-17 MiB against the plain step's 7.2),
    # and the embedding's norms read by sorting its indices (its Gram form held 3 x b·T·T).
    # 1.33-1.36x on TF 2.21 (9.6-9.8 MiB), 1.17x on 2.12 (Keras 2): the allocator's own
    # statistics with one op at a time, as the bench reads them.
    from compat_grads.bench.private import BFC, RECIPES

    peaks = [in_subprocess("compat_grads.bench.private", ["peak", "lstm", recipe, 0],
                           timeout=600, env=BFC)["peak_mb"] for recipe in (RECIPES[0],
                                                                           RECIPES[3])]
    assert peaks[1] <= 1.6 * peaks[0], peaks
