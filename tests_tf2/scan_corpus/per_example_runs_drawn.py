"""Per-example gradients by one session run per example, in the forms EWC and influence
functions write them: an example drawn at random in each iteration whose squared
gradients are summed (a Fisher diagonal), a feed dict held in a name with rows reshaped
to a batch of one; and look-alikes that are not reported: a random window of eight, rows
reshaped to four, a fetch that is no gradient, a feed built in a loop and run after it."""
import numpy as np
import tensorflow.compat.v1 as tf


class Classifier:
    def __init__(self, images, width):
        self.images = images
        self.weights = [tf.Variable(tf.ones([width, 2])), tf.Variable(tf.zeros([2]))]
        self.logits = tf.matmul(images, self.weights[0]) + self.weights[1]

    def fisher_diagonal(self, pool, session, draws=20):
        log_p = tf.nn.log_softmax(self.logits)
        picked = tf.squeeze(tf.random.categorical(self.logits, 1))
        scores = tf.gradients(log_p[0, picked], self.weights)
        totals = [np.zeros(w.get_shape().as_list()) for w in self.weights]
        for _ in range(draws):
            at = np.random.randint(pool.shape[0])
            rows = session.run(scores, feed_dict={self.images: pool[at:at + 1]})  # expect: CG113
            for k, row in enumerate(rows):
                totals[k] += np.square(row)
        return [t / draws for t in totals]


features = tf.placeholder(tf.float32, [None, 3])
targets = tf.placeholder(tf.int32, [None])
kernel = tf.Variable(tf.ones([3, 2]))
cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
    labels=targets, logits=tf.matmul(features, kernel)))
cost_grads = tf.gradients(cost, [kernel])
pool, answers = np.random.rand(16, 3), np.random.randint(2, size=16)
flat = pool.reshape(4, 12)
model = Classifier(features, 3)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    fisher = model.fisher_diagonal(pool, sess)
    scores = []
    for _, leave_out in enumerate(range(10)):
        one = {features: pool[leave_out, :].reshape(1, -1),
               targets: answers[leave_out].reshape(-1)}
        scores.append(sess.run(cost_grads, feed_dict=one))  # expect: CG113
    for row in range(4):
        alone = {features: np.reshape(pool[row], (1, 3)), targets: answers[row:row + 1]}
        scores.append(sess.run(cost_grads, alone))  # expect: CG113
    for _ in range(3):
        start = np.random.randint(8)
        batch = {features: pool[start:start + 8], targets: answers[start:start + 8]}
        scores.append(sess.run(cost_grads, feed_dict=batch))
    for block in range(4):
        four = {features: flat[block].reshape(4, -1), targets: answers[:4]}
        scores.append(sess.run(cost_grads, four))
    for leave_out in range(10):
        single = {features: pool[leave_out, :].reshape(1, -1),
                  targets: answers[leave_out].reshape(-1)}
        scores.append(sess.run(cost, feed_dict=single))
    for leave_out in range(10):
        last = {features: pool[leave_out:leave_out + 1], targets: answers[leave_out:leave_out + 1]}
    scores.append(sess.run(cost_grads, last))
