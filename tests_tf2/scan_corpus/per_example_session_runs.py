"""Per-example gradients by one session run per example, the way EWC's Fisher diagonal and
influence functions get them: a comprehension feeding data[i:i + 1], a for loop feeding
data[[i]] with feed_dict=, np.expand_dims of a row fetched with the loss; and look-alikes
that are not reported: a batch window per run, a fetch that is no gradient."""
import numpy as np
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [None, 3])
labels = tf.placeholder(tf.float32, [None])
w = tf.Variable(tf.ones([3]))
b = tf.Variable(0.0)
loss = tf.reduce_sum((tf.tanh(tf.reduce_sum(x * w, 1) + b) - labels) ** 2)
g = tf.gradients(loss, w)[0]
grads = tf.gradients(loss, [w, b])
data, targets = np.random.rand(8, 3), np.random.rand(8)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    per_example = [sess.run(g, {x: data[i:i + 1], labels: targets[i:i + 1]})  # expect: CG113
                   for i in range(len(data))]
    fisher = np.zeros(3)
    for k in range(len(data)):
        row = sess.run(grads, feed_dict={x: data[[k]], labels: targets[[k]]})  # expect: CG113
        fisher += row[0] ** 2
    for k in range(len(data)):
        value, grad = sess.run(  # expect: CG113
            [loss, g], {x: np.expand_dims(data[k], 0), labels: targets[k:k + 1]})
    batches = [sess.run(g, {x: data[i:i + 4], labels: targets[i:i + 4]}) for i in (0, 4)]
    losses = [sess.run(loss, {x: data[i:i + 1], labels: targets[i:i + 1]}) for i in range(8)]
