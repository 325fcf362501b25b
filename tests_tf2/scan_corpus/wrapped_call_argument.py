"""The class rows of a saliency map stacked inside a tf.reshape whose arguments are already
on a continuation line (the JSMA body of attack code): the rewrite is too long for its line
and wraps one indent past that continuation line, not past the statement."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(5)
input_images = tf.constant(rng.rand(3, 2, 2, 1), dtype=tf.float32)
dense_weights = tf.constant(rng.randn(4, 5), dtype=tf.float32)
saliency_logits = tf.tanh(tf.matmul(tf.reshape(input_images, [-1, 4]), dense_weights))
number_of_classes, number_of_features = 5, 4


def class_gradients(model_logits, input_placeholder):
    list_derivatives = []
    for class_index in range(number_of_classes):
        derivatives = tf.gradients(model_logits[:, class_index], input_placeholder)  # expect: CG101
        list_derivatives.append(derivatives[0])
    grads = tf.reshape(
        tf.stack(list_derivatives), shape=[number_of_classes, -1, number_of_features]
    )
    return grads


with tf.Session() as sess:
    result = sess.run(class_gradients(saliency_logits, input_images))
