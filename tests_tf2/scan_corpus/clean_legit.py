"""Legitimate gradient code: scalar losses, optimizer steps, whole-tensor tape sources, list
indexing of variables, loops over batches. No findings."""
import numpy as np
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [None, 3])
w = tf.Variable(np.ones((3, 2), np.float32))
b = tf.Variable(np.zeros(2, np.float32))
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b))

grads = tf.gradients(loss, [w, b])
grad_w = tf.gradients(loss, w)[0]
train = tf.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads, [w, b]))

batches = [x[:2], x[2:]]
per_batch = [tf.gradients(tf.reduce_sum(tf.matmul(part, w)), w)[0] for part in batches]
for var in [w, b]:
    step = tf.gradients(loss, var)[0]

doubled = tf.map_fn(lambda row: 2.0 * row, x)
with tf.GradientTape() as tape:
    tape.watch(x)
    out = tf.reduce_sum(tf.matmul(x, w) ** 2)
variables = [w, b]
whole = tape.gradient(out, x)
first = tape.gradient(out, variables[0])
some = tape.gradient(out, variables[:1])
