"""The usual TF1 recipe for the full Jacobian: a Python loop of tf.gradients, each row
expanded before stacking (so the result has an extra axis: (100, 1, 1, 50, 1), not the
(100, 1, 50, 1) its comment promises). The rewrite keeps that shape and those values."""
# exec: same
import tensorflow.compat.v1 as tf

x = tf.Variable(tf.random.normal((50, 1)))
A = tf.random.normal((100, 50))
y = tf.matmul(A, x)  # (100,1)

grads_list = []
for i in range(y.shape[0]):
    # 计算第i个y元素对x的梯度
    grad = tf.gradients(y[i], x)[0]  # expect: CG101
    # 增加维度以便堆叠
    grads_list.append(tf.expand_dims(grad, axis=0))

# 堆叠后调整到目标维度
jacobian = tf.stack(grads_list)
jacobian = tf.expand_dims(jacobian, axis=1)
print(jacobian.shape)  # 输出 (100,1,50,1)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    result = sess.run(jacobian)
