"""Row loops whose rows are not stacked at once: a list returned as it is, a class-gradient
cache built by a comprehension that keeps what is already there, a cache filled for the
labels asked for, a gradient list unpacked with `(g,) =`. --fix rewrites them to
cg.migrate.gradient_row_list and cg.migrate.fill_gradient_rows, which keep the list and the
cache exactly as the loops leave them and compute the missing rows at once."""
# exec: same
import numpy as np
import tensorflow as tf

try:
    xrange  # noqa: B018
except NameError:
    xrange = range

inputs = tf.constant(np.linspace(-1.0, 1.0, 8).reshape(2, 4), dtype=tf.float32)
weights = tf.constant(np.linspace(-0.6, 0.9, 12).reshape(4, 3), dtype=tf.float32)


def jacobian_list(predictions, x, nb_classes):
    """One derivative per class, kept in a list the caller indexes."""
    list_derivatives = []
    for class_ind in xrange(nb_classes):
        (derivatives,) = tf.gradients(predictions[:, class_ind], x)  # expect: CG101
        list_derivatives.append(derivatives)
    return list_derivatives


class Classifier:
    def __init__(self, x, nb_classes):
        self._input_ph = x
        self._nb_classes = nb_classes
        self._logits = tf.matmul(x, weights)
        self._probs = tf.nn.softmax(self._logits)
        self._class_grads = [None for _ in range(nb_classes)]
        self._logit_class_grads = [None for _ in range(nb_classes)]

    def _init_class_grads(self, label=None, logits=False):
        if label is None:
            if logits:
                if None in self._logit_class_grads:
                    self._logit_class_grads = [
                        tf.gradients(self._logits[:, i], self._input_ph)[0]  # expect: CG101
                        if self._logit_class_grads[i] is None else self._logit_class_grads[i]
                        for i in range(self._nb_classes)]
            else:
                if None in self._class_grads:
                    self._class_grads = [
                        tf.gradients(self._probs[:, i], self._input_ph)[0]  # expect: CG101
                        if self._class_grads[i] is None else self._class_grads[i]
                        for i in range(self._nb_classes)]
        else:
            for k in np.unique(label):
                if self._class_grads[k] is None:
                    self._class_grads[k] = tf.gradients(  # expect: CG101
                        self._probs[:, k], self._input_ph)[0]

    def class_gradient(self, label=None, logits=False):
        self._init_class_grads(label=label, logits=logits)
        grads = self._logit_class_grads if logits else self._class_grads
        return [g for g in grads if g is not None]


def row_gradients(outputs, params):
    """A list of per-row gradients, each for the first parameter."""
    return [tf.gradients(outputs[i], params)[0] for i in range(2)]  # expect: CG101


partial = Classifier(inputs, 3)
partial.class_gradient(label=[2, 0, 2])  # rows 0 and 2 first, row 1 on the next call
everything = Classifier(inputs, 3)

with tf.compat.v1.Session() as sess:
    result = sess.run([jacobian_list(tf.tanh(tf.matmul(inputs, weights)), inputs, 3),
                       partial.class_gradient(), everything.class_gradient(logits=True),
                       row_gradients(tf.sin(tf.matmul(inputs, weights)), [weights, inputs])])
