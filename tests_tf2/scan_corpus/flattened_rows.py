"""Class rows flattened before they are stacked, as the multi-class DeepFool of attack code
writes them inside its tf.while_loop body: one tf.gradients per logit of one image, each
row reshaped to [-1], then a [classes, pixels] matrix (and the same rows in a for loop, and
inline in tf.stack). A list of flattened rows kept as a list stays as it is."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(7)
image = tf.constant(rng.rand(1, 3, 3, 1), dtype=tf.float32)
weights = tf.constant(rng.randn(9, 4), dtype=tf.float32)
classes = 4


def model(x):
    return tf.nn.softmax(tf.matmul(tf.reshape(x, [-1, 9]), weights))


def body(i, z):
    xadv = tf.clip_by_value(image + z, 0.0, 1.0)
    y = tf.reshape(model(xadv), [-1])
    gs = [tf.reshape(tf.gradients(y[k], xadv)[0], [-1])  # expect: CG101
          for k in range(classes)]
    g = tf.stack(gs, axis=0)
    step = tf.reshape(0.01 * (g[1] - g[0]), [1, 3, 3, 1])
    return i + 1, z + step


_, noise = tf.while_loop(lambda i, z: i < 3, body, [0, tf.zeros_like(image)], back_prop=False)

logits = tf.reshape(model(image), [-1])
rows = []
for k in range(classes):
    row = tf.gradients(logits[k], image)[0]  # expect: CG101
    rows.append(tf.reshape(row, shape=[-1]))
matrix = tf.stack(rows)
inline = tf.stack([tf.reshape(tf.gradients(logits[k], image)[0], [-1])  # expect: CG102
                   for k in range(classes)])
kept = [tf.reshape(tf.gradients(logits[k], image)[0], [-1])  # expect: CG101
        for k in range(classes)]

with tf.Session() as sess:
    result = sess.run({"noise": noise, "matrix": matrix, "inline": inline, "kept": kept})
