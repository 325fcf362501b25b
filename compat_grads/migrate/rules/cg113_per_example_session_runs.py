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
a ``.run`` fetches a ``tf.gradients`` result (or a list of them) and feeds (in a dict
display, or a name bound once to one) one example, ``data[i:i + 1]``, ``data[[i]]``,
``data[i][None]``, ``[data[i]]``, ``np.expand_dims(data[i], 0)`` or
``data[i].reshape(1, -1)`` (``data[i, :]`` alike), with ``i`` a variable of a loop around
it or a name its body assigns (``i = np.random.randint(n)``, EWC's random draw). A window
of more than one example per run, or a fetch that is no gradient, is not reported.

Where the loop squares the gradients (EWC's Fisher diagonal, the mean of the squared
per-example gradients of the log-likelihood), the message says so: the mean over the
batch of the squared rows of the one run's result is that diagonal. Report only: the
source has no function from the input to the loss to pass.
"""
# Where the loop sums the squares of the gradients (EWC's Fisher diagonal).
FISHER = ("; the loop squares the gradients, as a Fisher diagonal does: that is the mean of "
          "the squared per-example gradients, np.mean(np.square(G[k]), axis=0) for each "
          "weight's G[k] of the one run, with loss_fn the log-likelihood of each example's "
          "label (a label sampled from the model's prediction for the Fisher, the data's "
          "label for the empirical Fisher)")


def check(ctx: Context, node: ast.AST) -> list[Finding]:
    """CG113 at a `.run(g, {x: data[i:i + 1]})` in a loop over `i`, `g` a gradient."""
    args = _run_args(ctx, node)
    if args is None:
        return []
    grad = _fetched_gradient(ctx, node, args[0])
    fed = _fed_example(ctx, node, args[1]) if grad is not None else None
    if fed is None:
        return []
    key, data, loop = fed
    weights = ast.unparse(grad.xs)
    fields = {"run": ast.unparse(node.func), "fetch": ast.unparse(args[0]), "x": key,
              "data": data, "loss": ast.unparse(grad.ys),
              "w": f"[{weights}]" if ctx.names.is_tensor(grad.xs) else weights,
              "fisher": FISHER if _squared(ctx, node, loop) else ""}
    return [ctx.finding(node, RULE.code, RULE.message("runs", **fields))]


def _run_args(ctx: Context, node: ast.AST) -> tuple[ast.expr, ast.Dict] | None:
    """(fetches, feed_dict) of `<session>.run(fetches, feed_dict)`, the feed a dict display
    or a name bound once to one."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"):
        return None
    args = pt.call_args(node, ("fetches", "feed_dict"))
    if not args or None in args:
        return None
    feed = rebinding.value_at(ctx, node, args[1].id) if isinstance(
        args[1], ast.Name) else args[1]
    return (args[0], feed) if isinstance(feed, ast.Dict) else None


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


def _fed_example(ctx: Context, run: ast.Call,
                 feed: ast.Dict) -> tuple[str, str, ast.AST] | None:
    """(the fed placeholder, the array, the loop) of a feed of one example indexed by a name
    that changes with each iteration of a loop around the run."""
    varying = _varying(ctx, feed)
    around = _ancestors(ctx, run)
    for key, value in zip(feed.keys, feed.values):
        data = _one_example(value, set(varying)) if key is not None else None
        loops = [varying[n] for n in names_in(value) if n in varying and id(varying[n]) in around]
        if data is not None and loops:
            return ast.unparse(key), ast.unparse(data), loops[0]
    return None


def _varying(ctx: Context, node: ast.AST) -> dict[str, ast.AST]:
    """The names that change from one iteration to the next of the loops and comprehensions
    around `node` (in its scope), with the innermost loop that changes each: the loop's
    variables and, for a statement loop, the names its body assigns (`j = order[i]`,
    `j = np.random.randint(n)`)."""
    found: dict[str, ast.AST] = {}
    node = ctx.parents.get(id(node))
    while node is not None and not isinstance(node, SCOPES):
        if isinstance(node, ast.For | ast.While):
            stored = {n.id for s in node.body for n in ast.walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            target = names_in(node.target) if isinstance(node, ast.For) else set()
            found = {**dict.fromkeys(target | stored, node), **found}
        for gen in getattr(node, "generators", []):
            found = {**dict.fromkeys(names_in(gen.target), node), **found}
        node = ctx.parents.get(id(node))
    return found


def _ancestors(ctx: Context, node: ast.AST) -> set[int]:
    """The ids of the nodes around `node`."""
    found, node = set(), ctx.parents.get(id(node))
    while node is not None:
        found.add(id(node))
        node = ctx.parents.get(id(node))
    return found


def _squared(ctx: Context, run: ast.Call, loop: ast.AST) -> bool:
    """Whether the loop squares what the run returns (`np.square(ders[k])`, `g ** 2`, also
    through a loop over it or a name assigned from it): the sum of squared per-example
    gradients of EWC's Fisher diagonal."""
    stmt = ctx.statement_of(run)
    results = names_in(stmt.targets[0]) if isinstance(stmt, ast.Assign) else set()
    for _ in range(2):  # `for k, row in enumerate(rows)`, `row = rows[k]`
        results |= {n for node in ast.walk(loop) for n in _bound_from(node, results)}
    for node in ast.walk(loop):
        square = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "square" and len(node.args) == 1)
        power = (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
                 and isinstance(node.right, ast.Constant) and node.right.value == 2)
        operand = node.args[0] if square else node.left if power else None
        if operand is not None and names_in(operand) & results:
            return True
    return False


def _bound_from(node: ast.AST, names: set[str]) -> set[str]:
    """The names a for loop or an assignment binds from values that read `names`."""
    if isinstance(node, ast.For) and names_in(node.iter) & names:
        return names_in(node.target)
    if isinstance(node, ast.Assign) and names_in(node.value) & names:
        return {n for t in node.targets for n in names_in(t)}
    return set()


def _one_example(value: ast.expr, indices: set[str]) -> ast.expr | None:
    """The array of `data[i:i + 1]`, `data[[i]]`, `data[i][None]`, `[data[i]]`,
    `np.expand_dims(data[i], 0)` or `data[i].reshape(1, -1)`, `i` one of `indices` and
    `data[i]` possibly `data[i, :]`."""
    if isinstance(value, ast.List) and len(value.elts) == 1:
        return _indexed(value.elts[0], indices)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        return _one_row_call(value, indices)
    if not isinstance(value, ast.Subscript):
        return None
    index = value.slice
    if isinstance(index, ast.Constant) and index.value is None:
        return _indexed(value.value, indices)
    if isinstance(index, ast.List) and len(index.elts) == 1 and names_in(index) & indices:
        return value.value
    if isinstance(index, ast.Tuple) and index.elts and all(map(_whole, index.elts[1:])):
        index = index.elts[0]
    return value.value if _unit_window(index, indices) else None


def _one_row_call(value: ast.Call, indices: set[str]) -> ast.expr | None:
    """The array of `np.expand_dims(data[i], 0)`, `data[i].reshape(1, -1)` or
    `np.reshape(data[i], (1, -1))`: a first axis of one."""
    args, attr = value.args, value.func.attr
    if attr == "expand_dims" and len(args) == 2:
        return _indexed(args[0], indices) if is_zero(args[1]) else None
    if attr != "reshape" or not args:
        return None
    shape = args[0] if len(args) == 1 else ast.Tuple(args)
    row = value.func.value
    if len(args) == 2 and isinstance(args[1], ast.Tuple | ast.List):  # np.reshape(row, shape)
        row, shape = args
    first = shape.elts[0] if isinstance(shape, ast.Tuple | ast.List) and shape.elts else None
    one = isinstance(first, ast.Constant) and type(first.value) is int and first.value == 1
    return _indexed(row, indices) if one else None


def _indexed(node: ast.expr, indices: set[str]) -> ast.expr | None:
    """The array of `data[i]` (or `data[i, :]`)."""
    if not isinstance(node, ast.Subscript):
        return None
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    ok = (parts and not isinstance(parts[0], ast.Slice) and names_in(parts[0]) & indices
          and all(map(_whole, parts[1:])))
    return node.value if ok else None


def _whole(index: ast.expr) -> bool:
    """`:`, a whole axis."""
    return isinstance(index, ast.Slice) and index.lower is index.upper is index.step is None


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
        "ignores y_true{fisher} (not rewritten: the source has no function from {x} to the "
        "loss)")},
    docs=DOCS, visits="nodes", check=check)
