"""The TF2 recipes for dy/dx (GradientTape.jacobian) written as a TF1 graph program: a
tape records in a graph too. Nothing legacy here: no findings."""
import tensorflow.compat.v1 as tf

x = tf.Variable(tf.random.normal((50, 1)))
A = tf.random.normal((100, 50))

with tf.GradientTape() as tape:
    y = tf.matmul(A, x)

# 先计算完整雅可比矩阵（100,1,50,1），再对x的维度求和得到与y同尺寸的结果
jacobian = tape.jacobian(y, x)
dy_dx = tf.reduce_sum(jacobian, axis=[2, 3])

s = tf.Variable(2.0)
with tf.GradientTape() as tape:
    z = tf.stack([s**2, s**3])  # y.shape=(2,)
dz_ds = tape.jacobian(z, s)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    result = sess.run([jacobian, dy_dx, dz_ds])
