"""Attack steps in a tf.while_loop whose counter is named `i`, like the variable of the
comprehension in the body that builds the class-gradient rows of the model: in Python 3 the
comprehension's `i` is a variable of its own, so the rows are a Jacobian over the classes
(CG101 / CG102), not one gradient row per loop iteration (CG109)."""
# exec: same
import numpy as np
import tensorflow as tf

classes = 3
w = tf.constant(np.linspace(-1.0, 1.0, 12).reshape(4, 3), tf.float32)
b = tf.constant([0.1, -0.2, 0.05])
x0 = tf.constant(np.linspace(0.5, -0.5, 8).reshape(2, 4), tf.float32)


def model(v):
    return tf.nn.softmax(tf.tanh(tf.matmul(v, w)) + b)


def step(i, x_adv):
    """The target comes from a call of the model: the runtime-checked rows."""
    probs = model(x_adv)
    grads = tf.stack([tf.gradients(probs[:, i], x_adv)[0]  # expect: CG102
                      for i in range(classes)])
    return i + 1, x_adv + 0.1 * tf.sign(grads[1] - grads[0])


def push(i, x_adv):
    """The target is one tensor: one Jacobian of the class columns."""
    logits = tf.matmul(x_adv, w) + b
    rows = [tf.gradients(logits[:, i], x_adv)[0] for i in range(classes)]  # expect: CG101
    grads = tf.stack(rows)
    return i + 1, x_adv - 0.05 * tf.reduce_sum(grads, axis=0)


_, attacked = tf.while_loop(lambda i, _: i < 4, step, [0, x0])
_, pushed = tf.while_loop(lambda i, _: i < 3, push, [tf.constant(0), x0])
with tf.compat.v1.Session() as sess:
    result = sess.run([attacked, pushed])
