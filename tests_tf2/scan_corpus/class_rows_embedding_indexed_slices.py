"""Class rows with respect to an embedding matrix read through tf.gather: each
tf.gradients row is an IndexedSlices (the touched rows only), and the program uses it as
one, applying each class's step to the rows it touched."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

table = np.random.RandomState(0).rand(6, 3).astype(np.float32)
emb = tf.constant(table)
ids = tf.constant([1, 4])
dense = tf.constant(np.random.RandomState(1).rand(3, 4).astype(np.float32))
logits = tf.matmul(tf.gather(emb, ids), dense)

class_grads = []
for c in range(4):
    class_grads.append(tf.gradients(logits[:, c], emb)[0])  # expect: CG101

with tf.Session() as sess:
    fetched = sess.run(class_grads)
stepped = []
for g in fetched:
    rows = table.copy()
    rows[g.indices] -= 0.1 * g.values
    stepped.append(rows)
result = stepped
