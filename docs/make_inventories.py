"""Writes the Sphinx inventories that link the docs to TensorFlow's and NumPy's API pages.

    python docs/make_inventories.py      # writes docs/_inventories/{tensorflow,numpy}.inv

TensorFlow publishes no Sphinx inventory, and the docs build must not need the network, so
both are generated from the installed packages' public names and committed: `tf.X`,
`tf.math.X`, ... (and `tf.keras.X` when Keras imports) point at their tensorflow.org page
(https://www.tensorflow.org/api_docs/python/tf/math/reduce_sum), `numpy.X` and `np.X` at
numpy.org's reference (https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html).
conf.py reads them with `intersphinx_mapping`; rerun this after a TensorFlow or NumPy
release that adds names. `tf.raw_ops` is left out: 1500 op pages nobody links from here.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import sys
import types
import zlib

HERE = pathlib.Path(__file__).resolve().parent
FOLDER = HERE / "_inventories"
TENSORFLOW_URL = "https://www.tensorflow.org/api_docs/python/"
NUMPY_URL = "https://numpy.org/doc/stable/"
SKIP = {"tf.raw_ops", "tf.tools", "tf.security", "tf.dtensor"}  # no API pages but raw_ops


def write(path: pathlib.Path, project: str, version: str, entries: dict) -> None:
    """An objects.inv (version 2) of {name: (role, uri)}, uris relative to the base URL."""
    header = ("# Sphinx inventory version 2\n"
              f"# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n")
    body = "".join(f"{name} py:{role} 1 {uri} -\n"
                   for name, (role, uri) in sorted(entries.items()))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.encode() + zlib.compress(body.encode(), 9))


def _role(value) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if inspect.isclass(value):
        return "class"
    return "function" if callable(value) else "data"


def _public(module):
    """(name, value) of a module's public attributes, skipping those that fail to load."""
    for name in sorted(dir(module)):
        if not name.startswith("_"):
            try:
                yield name, getattr(module, name)
            except (AttributeError, ImportError):
                continue


def walk(root, path: str, module_names: tuple):
    """(public path, value) of every name under `root`, breadth first (shortest path first).

    `module_names` are the names the API's modules at `path` have (TensorFlow's live in
    `tensorflow._api.v2` or in `tensorflow`); a submodule is entered only if its name is one
    of them plus its attribute name, so imported helpers and the API's copies of itself
    (`tf.compat.v2`, `tf.compat.v1.compat`) are not walked.
    """
    queue = [(root, path, module_names)]
    while queue:
        module, path, module_names = queue.pop(0)
        yield path, module
        for name, value in _public(module):
            here = f"{path}.{name}"
            if here in SKIP or here.endswith((".compat.v2", ".compat.v1.compat")):
                continue
            if isinstance(value, types.ModuleType) or type(value).__name__.endswith("Loader"):
                names = tuple(f"{base}.{name}" for base in module_names)
                if getattr(value, "__name__", None) in names:
                    queue.append((value, here, names))
            else:
                yield here, value


def _tf_canonical(tf_export):
    """The name TensorFlow's API docs file an object under ("math.reduce_sum" for
    tf.reduce_sum, "compat.v1.Session"), or None (constants, Keras)."""
    def canonical(value):
        try:
            return tf_export.get_canonical_name_for_symbol(value, add_prefix_to_v1_names=True)
        except Exception:  # noqa: BLE001 - private API: any failure means "no canonical name"
            return None
    return canonical


def tensorflow_entries() -> tuple[str, dict]:
    import tensorflow as tf
    from tensorflow.python.util import tf_export

    canonical = _tf_canonical(tf_export)
    entries = {}
    roots = [(tf, "tf", ("tensorflow._api.v2", "tensorflow"))]
    try:
        keras = tf.keras
        roots.append((keras, "tf.keras", (keras.__name__,)))
    except ImportError:
        pass
    for root, prefix, module_names in roots:
        for path, value in walk(root, prefix, module_names):
            if path in entries:
                continue
            role = _role(value)
            if role == "data":  # constants are listed on their module's page
                module, _, name = path.rpartition(".")
                entries[path] = (role, module.replace(".", "/") + "#" + name)
                continue
            name = canonical(value) if role != "module" else None
            page = ("tf." + name) if name else path
            entries[path] = (role, page.replace(".", "/"))
    return tf.__version__, entries


_NUMPY_MODULES = {"numpy": "reference/routines.html",
                  "numpy.linalg": "reference/routines.linalg.html",
                  "numpy.fft": "reference/routines.fft.html",
                  "numpy.random": "reference/random/index.html"}


def _numpy_uri(path: str, value, numpy) -> str | None:
    module, _, name = path.rpartition(".")
    if isinstance(value, types.ModuleType):
        return _NUMPY_MODULES.get(path)
    if inspect.isclass(value) and issubclass(value, numpy.generic):
        return f"reference/arrays.scalars.html#{path}"
    if not callable(value):
        return f"reference/constants.html#{path}" if module == "numpy" else None
    if module == "numpy.random":
        if inspect.isclass(value):
            return None
        return f"reference/random/generated/{path}.html"
    return f"reference/generated/{path}.html"


def numpy_entries() -> tuple[str, dict]:
    import numpy

    entries = {}
    for path, value in walk(numpy, "numpy", ("numpy",)):
        if path.rpartition(".")[0] not in _NUMPY_MODULES and path != "numpy":
            continue
        uri = _numpy_uri(path, value, numpy)
        if uri and path not in entries:
            entries[path] = (_role(value), uri)
        if path == "numpy.ndarray":
            for name, member in _public(numpy.ndarray):
                role = "method" if callable(member) else "attribute"
                uri = f"reference/generated/numpy.ndarray.{name}.html"
                entries[f"numpy.ndarray.{name}"] = (role, uri)
    entries.update({"np" + name[5:]: entry for name, entry in list(entries.items())})
    return numpy.__version__, entries


def main() -> int:
    version, entries = tensorflow_entries()
    write(FOLDER / "tensorflow.inv", "TensorFlow", version, entries)
    print(f"{FOLDER.name}/tensorflow.inv: {len(entries)} names, TensorFlow {version}")
    version, entries = numpy_entries()
    write(FOLDER / "numpy.inv", "NumPy", version, entries)
    print(f"{FOLDER.name}/numpy.inv: {len(entries)} names, NumPy {version}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
