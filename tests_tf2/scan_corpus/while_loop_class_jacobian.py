"""The class Jacobian built inside a tf.while_loop body, as an iterative attack does: each
step differentiates the 10 class logits of a small CNN with respect to the current image,
picks a step from those rows and updates the image."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(5)
nb_classes = 10
x0 = tf.constant(rng.rand(2, 6, 6, 1), dtype=tf.float32)
target = tf.constant(np.eye(nb_classes)[[3, 7]], dtype=tf.float32)
kernel = tf.constant(rng.randn(3, 3, 1, 4) * 0.5, dtype=tf.float32)
dense = tf.constant(rng.randn(3 * 3 * 4, nb_classes) * 0.3, dtype=tf.float32)


def get_logits(images):
    hidden = tf.nn.relu(tf.nn.conv2d(images, kernel, [1, 2, 2, 1], "SAME"))
    return tf.matmul(tf.reshape(hidden, [-1, 3 * 3 * 4]), dense)


def body(x_in, i_in):
    logits = get_logits(x_in)
    list_derivatives = []
    for class_ind in range(nb_classes):
        derivatives = tf.gradients(logits[:, class_ind], x_in)  # expect: CG101
        list_derivatives.append(derivatives[0])
    grads = tf.reshape(tf.stack(list_derivatives), shape=[nb_classes, -1, 36])
    toward = tf.reduce_sum(grads * tf.reshape(tf.transpose(target), [nb_classes, -1, 1]), 0)
    x_out = tf.clip_by_value(x_in + 0.05 * tf.reshape(tf.sign(toward), [-1, 6, 6, 1]), 0.0, 1.0)
    return x_out, i_in + 1


x_adv, steps = tf.while_loop(lambda x_in, i_in: i_in < 4, body, [x0, 0])

with tf.Session() as sess:
    result = sess.run([x_adv, get_logits(x_adv), steps])
