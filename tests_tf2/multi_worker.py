"""One worker of the MultiWorkerMirroredStrategy test (tests_tf2/test_distribute.py starts
two of them with TF_CONFIG on 127.0.0.1): computes with distribute= and inside strategy.run
on a distributed dataset, and saves what it got to the .npz file named on its command line."""

import sys

import numpy as np
import tensorflow as tf

import compat_grads as cg

RNG = np.random.RandomState(0)
X = RNG.randn(5, 3).astype(np.float32)  # 5 rows or examples over 2 workers: uneven
W = RNG.randn(3, 4).astype(np.float32)
LABELS = RNG.randn(8, 2).astype(np.float32)
INPUTS = RNG.randn(8, 3).astype(np.float32)


def layer(x):
    return tf.tanh(tf.matmul(x, tf.constant(W)))


def squared_error(y_true, y_pred):
    return tf.reduce_sum((y_pred - y_true) ** 2, axis=1)


def main(path):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        kernel = tf.Variable(np.full((3, 2), 0.1, np.float32))

    def model(x):
        return tf.matmul(x, kernel)

    jacobian = cg.stacked_jacobian(layer, tf.constant(X), distribute=strategy)
    per_example = cg.per_example_gradients(squared_error, model, tf.constant(X),
                                           tf.zeros([5, 2]), weights=[kernel],
                                           distribute=strategy)
    dataset = tf.data.Dataset.from_tensor_slices((INPUTS, LABELS)).batch(8)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA)
    batches = strategy.experimental_distribute_dataset(dataset.with_options(options))

    @tf.function
    def step(x, y):
        def replica(x, y):
            (grads,) = cg.per_example_gradients(squared_error, model, x, y, weights=[kernel])
            return tf.reduce_sum(grads, 0)

        return strategy.reduce("SUM", strategy.run(replica, args=(x, y)), axis=None)

    (summed,) = [step(*batch) for batch in batches]
    np.savez(path, jacobian=jacobian.numpy(), per_example=per_example[0].numpy(),
             summed=summed.numpy(), replicas=strategy.num_replicas_in_sync)


if __name__ == "__main__":
    main(sys.argv[1])
