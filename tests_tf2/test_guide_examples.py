"""The guide's examples of the value-and-aux and flat-matrix sections run as written, and do
what their comments say."""

import pathlib
import re

import numpy as np
import tensorflow as tf

import compat_grads as cg

GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "guide.rst"


def _blocks(title):
    """The python code blocks of the guide's section `title`."""
    text = GUIDE.read_text()
    start = text.index(f"\n{title}\n")
    end = re.search(r"\n[^\n]+\n-{4,}\n", text[start + len(title) + 2:])
    section = text[start:start + len(title) + 2 + end.start()]
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)
    assert blocks, f"no python example under {title!r}"
    return ["\n".join(line[3:] for line in block.splitlines()) for block in blocks]


def test_value_and_aux_example():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    scope = {"tf": tf, "cg": cg, "model": model, "loss_fn": tf.keras.losses.mean_squared_error,
             "x_batch": tf.ones([5, 3]), "y_batch": tf.zeros([5, 2])}
    for block in _blocks("The value and aux with the derivative"):
        exec(block, scope)  # noqa: S102 - the documentation's own example
    assert scope["y"].shape == (2, 2) and scope["jac"].shape == (2, 2, 2)
    np.testing.assert_allclose(scope["aux"]["u"].numpy(), np.tanh(scope["x"].numpy()),
                               rtol=1e-6)
    assert scope["losses"].shape == (5,) and scope["grads"][0].shape == (5, 3, 2)


def test_flat_levenberg_marquardt_example_reduces_the_error():
    tf.keras.utils.set_random_seed(0)
    scope = {"tf": tf, "cg": cg}
    (block,) = _blocks("Flat matrices for Newton and Levenberg–Marquardt")
    exec(block, scope)  # noqa: S102 - the documentation's own example
    assert scope["J"].shape == (32, 16)
    before = float(tf.norm(scope["e"]))
    after = float(tf.norm(scope["errors"](scope["weights"])))
    assert after < 0.9 * before  # a linear least-squares problem: one damped step gets close


def test_the_install_commands_install_what_exists():
    """The guide's first commands install from the clone (the package index has no
    compat_grads yet), with extras setup.cfg defines; the index line is only a note."""
    import configparser

    text = GUIDE.read_text()
    section = text[text.index("Install and check your TensorFlow"):]
    commands = re.search(r"\.\. code-block:: bash\n\n((?:   .*\n)+)", section).group(1)
    config = configparser.ConfigParser()
    config.read(GUIDE.parents[1] / "setup.cfg")
    extras = set(config["options.extras_require"])
    installs = re.findall(r'pip install "\.\[(\w+)\]"', commands)
    assert installs and set(installs) <= extras
    assert "compat_grads[" not in commands
    assert "compat-grads check" in commands
