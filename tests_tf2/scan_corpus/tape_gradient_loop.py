"""TF2 per-row Jacobians: tape.gradient of one output column or row per loop iteration
(class-gradient code in attack and explanation libraries): reported, not rewritten. The
first two slice each row after the tape stopped recording, so every gradient is None: the
finding says so."""
import numpy as np
import tensorflow as tf


def class_gradients(model, x, classes):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        predictions = model(x)
    grads = []
    for k in range(classes):
        grads.append(tape.gradient(predictions[:, k], x).numpy())  # expect: CG110
    return np.stack(grads, axis=1)


def rows_by_comprehension(f, x, n):
    with tf.GradientTape(persistent=True) as g:
        g.watch(x)
        y = f(x)
    return tf.stack([g.gradient(y[i], x) for i in range(n)])  # expect: CG110


def class_gradients_recomputed(model, x_input, classes):
    """The row is picked into a name first; the model runs again for every class."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x_input)
        gradients = []
        for i in range(classes):
            predictions = model(x_input)
            prediction = predictions[:, i]
            gradients.append(tape.gradient(prediction, x_input).numpy())  # expect: CG110
    return np.swapaxes(np.array(gradients), 0, 1)


def block_per_source(blocks, error_fn):
    """A different source in every iteration: blocks of a block-diagonal Jacobian, each
    one's own gradient, not rows of one Jacobian."""
    grads = []
    for j in range(len(blocks)):
        with tf.GradientTape() as t:
            t.watch(blocks[j])
            err = error_fn(blocks[j])
        grads.append(t.gradient(err, blocks[j]))
    return grads


def tiled_gradients(loss_fn, image, tile, starts):
    """Windows of an image, their loss gradients summed: the gradient of the total loss,
    not a Jacobian."""
    total = tf.zeros_like(image)
    for s in starts:
        with tf.GradientTape() as tape:
            tape.watch(image)
            loss = loss_fn(image[s:s + tile])
        total = total + tape.gradient(loss, image)
    return total


def one_gradient_per_model(models, x, y):
    """A loop, but each iteration differentiates a different loss: not a Jacobian."""
    grads = []
    for model in models:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads.append(tape.gradient(loss, model.trainable_variables))
    return grads
