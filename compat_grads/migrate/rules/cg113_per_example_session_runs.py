"""CG113: per-example gradients by a Python loop of `sess.run(g, {x: data[i:i + 1]})`, one
run per example (how EWC's Fisher diagonal and influence functions get them)."""

from __future__ import annotations

import ast

from compat_grads.migrate import patterns as pt
from compat_grads.migrate import rebinding
from compat_grads.migrate.context import SCOPES, Context, is_zero, names_in
from compat_grads.migrate.findings import REPORT_ONLY, Finding, Rule

DOCS = """\
A loop (or a comprehension) that feeds one example at a time and fetches a gradient:

.. code-block:: python

   x = tf.placeholder(tf.float32, [None, 3])
   w = tf.Variable(tf.ones([3]))
   loss = tf.reduce_sum(tf.tanh(tf.reduce_sum(x * w, 1)) ** 2)
   g = tf.gradients(loss, w)[0]
   per_example = [sess.run(g, {x: data[i:i + 1]}) for i in range(len(data))]

One run (and one batch of one) per example. :func:`~compat_grads.per_example_gradients`
computes every example's gradient in one graph and one run, vectorized over the batch:

.. code-block:: python

   def model(x):  # the ops from the placeholder to the predictions
       return tf.tanh(tf.reduce_sum(x * w, 1))

   def loss_fn(y_true, y_pred):  # one loss per example
       return y_pred ** 2

   G = cg.per_example_gradients(loss_fn, model, x, x, weights=[w])
   per_example = sess.run(G, {x: data})[0]

The model must be a function of its input (a ``def``, a lambda or a Keras model) and the
loss one value per example, because each example is run through them on its own; a loss
without labels takes any batched ``y`` (``x`` itself) and ignores ``y_true``. Found where
a ``.run`` fetches a ``tf.gradients`` result (or a list of them) and feeds one example,
``data[i:i + 1]``, ``data[[i]]``, ``data[i][None]``, ``[data[i]]`` or
``np.expand_dims(data[i], 0)``, with ``i`` the variable of a loop around it. Report only:
the source has no function from the input to the loss to pass.
"""


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG113 at a `.run(g, {x: data[i:i + 1]})` in a loop over `i`, `g` a gradient."""
    args = _run_args(node)
    if args is None:
        return []
    grad = _fetched_gradient(ctx, node, args[0])
    fed = _fed_example(ctx, node, args[1]) if grad is not None else None
    if fed is None:
        return []
    key, data = fed
    weights = ast.unparse(grad.xs)
    fields = {"run": ast.unparse(node.func), "fetch": ast.unparse(args[0]), "x": key,
              "data": data, "loss": ast.unparse(grad.ys),
              "w": weights if isinstance(grad.xs, ast.List) else f"[{weights}]"}
    return [ctx.finding(node, RULE.code, RULE.message("runs", **fields))]


def _run_args(node: ast.AST) -> list[ast.expr] | None:
    """(fetches, feed_dict) of `<session>.run(fetches, feed_dict)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"):
        return None
    args = pt.call_args(node, ("fetches", "feed_dict"))
    return args if args and None not in args and isinstance(args[1], ast.Dict) else None


def _fetched_gradient(ctx: Context, at: ast.AST, fetch: ast.expr) -> pt.Grad | None:
    """The `tf.gradients` call a fetch is (or the first of a list of fetches), inline or the
    one value of a name."""
    for node in fetch.elts if isinstance(fetch, ast.List | ast.Tuple) else [fetch]:
        value = rebinding.value_at(ctx, at, node.id) if isinstance(node, ast.Name) else node
        if isinstance(value, ast.Subscript):
            value = value.value
        parts = pt.grad_parts(value) if ctx.is_gradients(value) else None
        if parts is not None:
            return pt.Grad(value, parts[0], parts[1], None, parts[2])
    return None


def _fed_example(ctx: Context, at: ast.AST, feed: ast.Dict) -> tuple[str, str] | None:
    """(the fed placeholder, the array) of a feed of one example of a loop's index."""
    indices = _loop_variables(ctx, at)
    for key, value in zip(feed.keys, feed.values):
        data = _one_example(value, indices) if key is not None else None
        if data is not None:
            return ast.unparse(key), ast.unparse(data)
    return None


def _loop_variables(ctx: Context, node: ast.AST) -> set[str]:
    """The names the loops and comprehensions around `node` (in its scope) bind."""
    found = set()
    node = ctx.parents.get(id(node))
    while node is not None and not isinstance(node, SCOPES):
        loops = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
        found |= {name for loop in loops for name in names_in(loop.target)}
        node = ctx.parents.get(id(node))
    return found


def _one_example(value: ast.expr, indices: set[str]) -> ast.expr | None:
    """The array of `data[i:i + 1]`, `data[[i]]`, `data[i][None]`, `[data[i]]` or
    `np.expand_dims(data[i], 0)`, `i` one of `indices`."""
    if isinstance(value, ast.List) and len(value.elts) == 1:
        return _indexed(value.elts[0], indices)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and (
            value.func.attr == "expand_dims") and len(value.args) == 2:
        axis = value.args[1]
        return _indexed(value.args[0], indices) if is_zero(axis) else None
    if not isinstance(value, ast.Subscript):
        return None
    index = value.slice
    if isinstance(index, ast.Constant) and index.value is None:
        return _indexed(value.value, indices)
    if isinstance(index, ast.List) and len(index.elts) == 1 and names_in(index) & indices:
        return value.value
    return value.value if _unit_window(index, indices) else None


def _indexed(node: ast.expr, indices: set[str]) -> ast.expr | None:
    """The array of `data[i]`."""
    ok = (isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice | ast.Tuple)
          and names_in(node.slice) & indices)
    return node.value if ok else None


def _unit_window(index: ast.expr, indices: set[str]) -> bool:
    """`i:i + 1` (or `i:1 + i`) over a loop index."""
    if not (isinstance(index, ast.Slice) and index.lower is not None and index.step is None
            and names_in(index.lower) & indices):
        return False
    upper, one = index.upper, ast.Constant(1)
    return isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add) and any(
        ast.dump(a) == ast.dump(index.lower) and ast.dump(b) == ast.dump(one)
        for a, b in ((upper.left, upper.right), (upper.right, upper.left)))


RULE = Rule(
    code="CG113", name="per-example-session-runs", fix=REPORT_ONLY,
    summary=("sess.run(g, {x: data[i:i + 1]}) in a loop, g from tf.gradients: per-example "
             "gradients one run at a time"),
    messages={"runs": (
        "per-example gradients by one {run} per example ({fetch} fed {x} one example of "
        "{data} at a time); use cg.per_example_gradients(loss_fn, model, {x}, y, "
        "weights={w}) and run it once over the whole batch ({{{x}: {data}}}): write the "
        "model as a function of its input, model({x}) -> predictions (the ops from {x} to "
        "the predictions, in a def or a Keras model), and loss_fn(y_true, y_pred) -> one "
        "loss per example ({loss} of one example); a loss without labels takes y={x} and "
        "ignores y_true (not rewritten: the source has no function from {x} to the loss)")},
    docs=DOCS, visits="nodes", check=check)
