"""The class rows of a small CNN, as attack code builds them (a saliency map, DeepFool, the
Jacobian augmentation of substitute training): one tf.gradients per class logit, a column
of a [batch, 10] output, with respect to the image batch."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(3)
x = tf.constant(rng.rand(2, 6, 6, 1), dtype=tf.float32)
kernel = tf.constant(rng.randn(3, 3, 1, 4) * 0.5, dtype=tf.float32)
dense = tf.constant(rng.randn(3 * 3 * 4, 10) * 0.3, dtype=tf.float32)
hidden = tf.nn.relu(tf.nn.conv2d(x, kernel, [1, 2, 2, 1], "SAME"))
logits = tf.matmul(tf.reshape(hidden, [-1, 3 * 3 * 4]), dense)

class_rows = []
for c in range(10):
    class_rows.append(tf.gradients(logits[:, c], x)[0])  # expect: CG101
jacobian = tf.stack(class_rows)  # 10 x 2 x 6 x 6 x 1

with tf.Session() as sess:
    result = sess.run(jacobian)
