"""The usual TF1 recipe for dy/dx with the shape of y: tf.map_fn over the values of y.

As published it fails at run time (a TensorArray element is read twice); the rewrite runs and
matches the oracle (the row sums of A, in the recipe's final shape (100, 1, 1))."""
# exec: crashes
import numpy as np
import tensorflow.compat.v1 as tf

A_value = np.random.RandomState(0).normal(size=(100, 50)).astype(np.float32)
oracle = A_value.sum(axis=1).reshape(100, 1, 1)

x = tf.Variable(tf.random.normal((50, 1)))
A = tf.constant(A_value)
y = tf.matmul(A, x)  # (100,1)


# 定义单个y元素对x的梯度计算函数
def single_element_grad(y_element):
    return tf.gradients(y_element, x)[0]


# 遍历y的所有元素，得到每个元素对x的梯度，再求和压缩维度
per_element_grads = tf.map_fn(single_element_grad, tf.squeeze(y))  # expect: CG103
dy_dx = tf.expand_dims(tf.reduce_sum(per_element_grads, axis=1), axis=1)
print(dy_dx.shape)  # 输出 (100,1)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    result = sess.run(dy_dx)
