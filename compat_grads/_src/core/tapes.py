"""What a `tf.GradientTape` recorded: checked before a tensor target is differentiated on it.

TensorFlow gives None (or zeros) for a source the tape never watched and for a target it
never recorded, the same as for a source the target does not depend on. The first two are
mistakes, and compat_grads says so; the third is a right answer and stays one.

A tape answers "would you record an op with these inputs?" (whether it watched a tensor or
recorded the op that made it) only from the thread's set of active tapes, which may hold
other tapes. The question is asked in a thread of its own, where the set holds this tape
alone.
"""

from __future__ import annotations

import sys
import threading

from compat_grads._src.core import tf as _tf
from compat_grads._src.core.errors import ModeError, message
from compat_grads._src.core.tf import op_of, tf


def read_variable(tape, variable):
    """A variable target read while `tape` records (as `GradientTape.jacobian` does), so the
    read is on the tape: read after recording, it is a new tensor the tape never saw."""
    with tape._ensure_recording():
        return tf.convert_to_tensor(variable)


def check(function, tape, target, flat, paths):
    """ModeError for a source the tape never watched, a target another tape recorded, or a
    target the tape recorded nothing of though the graph shows it computed from a source."""
    recorded = _recorded_on(tape, [target, *flat])
    for leaf, path, seen in zip(flat, paths, recorded[1:]):
        if not (seen or _variable_watched(tape, leaf)):
            raise _unwatched_error(function, path, leaf)
        if recorded[0] and _made_after(leaf, target):
            raise swapped_error(function, path, "was computed after the target (eager "
                                "tensors are made in order, and the target is older)")
    if recorded[0] or isinstance(target, tf.Variable):
        return
    if _tf.tape_set_records(target):
        raise ModeError(message(
            function, "target was not recorded by the tape given, but by another "
            "GradientTape that is still recording: the tape given cannot differentiate it "
            "(TensorFlow would give None, or zeros with unconnected_gradients='zero')",
            "Pass the tape that recorded the target (with nested tapes, the gradient an "
            "inner tape computes is recorded by the outer one), or pass a callable "
            "f(sources)."))
    if _recorded_by_another(tape, target):
        raise ModeError(message(
            function, "target was not recorded by the tape given, but by another "
            "GradientTape that has stopped recording (its `with` block had ended, or the "
            "target was computed under it alone): the tape given cannot differentiate it "
            "(TensorFlow would give None, or zeros with unconnected_gradients='zero')",
            "Pass the tape whose `with` block computed the target, or compute the target "
            "inside the block of the tape you pass, or pass a callable f(sources)."))
    if any(derives_from(target, leaf) for leaf in flat):
        raise ModeError(message(
            function, "target was computed from the sources, but the tape given recorded "
            "nothing of it: it was computed after the tape's `with` block ended (or under "
            "tape.stop_recording()), so TensorFlow would give None, or zeros with "
            "unconnected_gradients='zero'", "Compute the target inside the `with "
            "tf.GradientTape() as tape:` block, or pass a callable f(sources)."))


def swapped_error(function, path, how) -> ValueError:
    """A source the target cannot depend on because of how the two were made: `how` says."""
    return ValueError(message(
        function, f"{path} {how}, so the target cannot depend on it and its derivative "
        "would be None: the arguments look swapped",
        f"Pass what to differentiate first and what to differentiate with respect "
        f"to second: {function}(y, x) for y computed from x."))


def _made_after(leaf, target) -> bool:
    """Whether eager tensor `leaf` was made after eager tensor `target`: every eager tensor
    takes the next number of one counter when it is made, so the target cannot have been
    computed from it (a graph records ancestry instead: `derives_from`)."""
    ids = [getattr(t, "_id", None) if _is_eager_tensor(t) else None for t in (leaf, target)]
    return None not in ids and ids[0] > ids[1]


def _is_eager_tensor(t) -> bool:
    return tf.is_tensor(t) and not isinstance(t, tf.Variable) and op_of(t) is None


# Ops no derivative flows through (tf.gradients treats their outputs as constants).
_CONSTANT_OPS = frozenset({"StopGradient", "PreventGradient", "ZerosLike", "OnesLike",
                           "Shape", "Size", "Rank"})


def derives_from(y, x) -> bool:
    """Whether graph tensor `y` is computed from graph tensor `x` along ops a derivative
    flows through (floating tensors, no tf.stop_gradient): False for eager tensors, which
    keep no record of what made them, and for variables."""
    if not (_is_graph_tensor(y) and _is_graph_tensor(x)) or y.graph is not x.graph:
        return False  # (a tf.function's capture of an outer tensor is another tensor)
    seen, todo = set(), [y]
    while todo:
        t = todo.pop()
        if t is x:
            return True
        if t.ref() in seen or t.op.type in _CONSTANT_OPS or not t.dtype.is_floating:
            continue
        seen.add(t.ref())
        todo.extend(t.op.inputs)
    return False


def _is_graph_tensor(t) -> bool:
    return tf.is_tensor(t) and not isinstance(t, tf.Variable) and op_of(t) is not None


def _recorded_by_another(tape, target) -> bool:
    """Whether a GradientTape other than `tape`, no longer recording, holds the op that made
    `target`. Asked only for a target `tape` did not record: a constant target (one made
    from no watched tensor, or through tf.stop_gradient) is recorded by no tape, and its
    derivatives are rightly None or zeros."""
    return any(other is not tape and other._tape is not None
               and _recorded_on(other, [target])[0] for other in _tapes_in_scope())


def _tapes_in_scope() -> list:
    """The GradientTapes the calling code holds in its variables, in every frame on the
    stack. TensorFlow keeps no list of the tapes that have stopped, and the `as` name of a
    `with tf.GradientTape() as tape:` block outlives the block: a search of every live
    object would find the rest too, but costs a tenth of a second in a large program."""
    found, frame = {}, sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, tf.GradientTape):
                found[id(value)] = value
        frame = frame.f_back
    return list(found.values())


def _recorded_on(tape, tensors) -> list:
    """For each tensor, whether `tape` watched it or recorded the op that made it (False for
    a variable: its handle is what the tape watches, see `_variable_watched`)."""
    if tape._tape is None:  # a persistent tape that never recorded
        return [False] * len(tensors)
    found, failed = [], []

    def ask():
        _tf.push_tape(tape._tape)
        try:
            found.extend(not isinstance(t, tf.Variable) and _tf.tape_set_records(t)
                         for t in tensors)
        except Exception as err:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(err)
        finally:
            _tf.pop_tape(tape._tape)
    asking = threading.Thread(target=ask)
    asking.start()
    asking.join()
    if failed:
        raise failed[0]
    return found


def _variable_watched(tape, leaf) -> bool:
    """A variable counts as watched when the tape watches it, or when the tape watches the
    variables it reads and so never read this one: it is then truly unconnected."""
    if not isinstance(leaf, tf.Variable):
        return False
    return tape._watch_accessed_variables or any(
        v is leaf for v in tape.watched_variables())


def _unwatched_error(function, path, leaf):
    if isinstance(leaf, tf.Variable):
        return ModeError(message(
            function, f"{path} is a variable the tape does not watch (it was created with "
            "watch_accessed_variables=False and tape.watch was not called on it), so no "
            "derivative can reach it: TensorFlow would give None, or zeros with "
            "unconnected_gradients='zero'",
            "Call tape.watch(v) inside the `with tf.GradientTape(...) as tape:` block, "
            "before the target is computed, or pass a callable f(sources)."))
    return ModeError(message(
        function, f"{path} was not watched by the tape: it is neither a tensor passed to "
        "tape.watch nor computed while the tape recorded, so no derivative can reach it "
        "(TensorFlow would give None, or zeros with unconnected_gradients='zero', "
        "whatever the target)", "Call tape.watch(x) inside the `with "
        "tf.GradientTape() as tape:` block before computing the target from x (a slice "
        "such as x[:, 0] taken after recording is a new tensor: differentiate with respect "
        "to x and index the result), or pass a callable f(sources)."))
