"""Newer syntax must parse: match, the walrus, f-strings with nested quotes and format specs;
a finding inside a case block is still found."""
# exec: same
import tensorflow.compat.v1 as tf

x = tf.placeholder(tf.float32, [3])
y = tf.stack([x[0] ** 2, x[1] * x[2], tf.exp(x[2])])
width = 8


def build(kind: str):
    match kind:
        case "rows":
            return tf.stack([tf.gradients(y[i], x)[0] for i in range(3)])  # expect: CG102
        case "hessian" | "second":
            return tf.hessians(tf.reduce_sum(y), x)  # expect: CG105
        case _:
            return None


if (result := build("rows")) is not None:
    print(f"{'rows'!r:>{width}} {result.shape} {f'{len(y.shape)}'}")

with tf.Session() as sess:
    result = sess.run([build("rows"), build("second")], {x: [0.5, -1.0, 2.0]})
