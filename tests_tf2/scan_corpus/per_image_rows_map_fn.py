"""The per-image DeepFool form: tf.map_fn over a batch of images, each image's class rows
built inside the fn (flattened, then stacked) and one step taken along them. map_fn hands
its fn to AutoGraph; the rewritten rows run the same inside it. The gradients are with
respect to a value the fn computes from its element, so the map works (CG103 says so);
the rows are CG103's, and rewritten once the map is."""
# exec: same
import numpy as np
import tensorflow.compat.v1 as tf

rng = np.random.RandomState(11)
images = tf.constant(rng.rand(3, 2, 2, 1), dtype=tf.float32)
weights = tf.constant(rng.randn(4, 3), dtype=tf.float32)
classes = 3


def model(x):
    return tf.nn.softmax(tf.matmul(tf.reshape(x, [-1, 4]), weights))


def step(image):
    xadv = tf.expand_dims(image, axis=0)
    y = tf.reshape(model(xadv), [-1])
    gs = [tf.reshape(tf.gradients(y[k], xadv)[0], [-1])
          for k in range(classes)]
    g = tf.stack(gs, axis=0)
    return tf.reshape(g[1] - g[0], [2, 2, 1])


steps = tf.map_fn(step, images, dtype=tf.float32, back_prop=False)  # expect: CG103

with tf.Session() as sess:
    result = sess.run(steps)
