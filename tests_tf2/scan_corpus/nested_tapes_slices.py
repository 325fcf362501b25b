"""Per-sample Hessians with nested tapes on slices, written as a TF1 graph program:
differentiating with respect to xy[:, 0], a slice made after recording, gives None (report
only: no safe rewrite)."""
import numpy as np
import tensorflow.compat.v1 as tf

x = np.array([[-6.0, 1.0, 2.0, 4.0]])
y = np.array([[-3.0, 8.0, 9.0, 12.0]])
xy = tf.convert_to_tensor(np.concatenate([x.T, y.T], axis=1))

# 使用persistent=True保留tape，避免调用一次后被释放
with tf.GradientTape(persistent=True) as tape2:
    tape2.watch(xy)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xy)
        f = 3 * xy[:, 0] ** 2 * xy[:, 1] + xy[:, 1] ** 2

    # 计算一阶导数的两个分量
    df_dx = tape.gradient(f, xy[:, 0])  # expect: CG104
    df_dy = tape.gradient(f, xy[:, 1])  # expect: CG104

# 计算二阶导数的四个分量
d2f_dx2 = tape2.gradient(df_dx, xy[:, 0])  # expect: CG104
d2f_dxdy = tape2.gradient(df_dx, xy[:, 1])  # expect: CG104
d2f_dydx = tape2.gradient(df_dy, xy[:, 0])  # expect: CG104
d2f_dy2 = tape2.gradient(df_dy, xy[:, 1])  # expect: CG104
