"""tf.contrib.slim, tf.contrib.layers and tf.contrib.framework's variable helpers: the tf-slim package.

tf-slim (pip `tf-slim`) is the maintained home of tf.contrib.slim and tf.contrib.layers: the same
functions, arguments, default scopes and variable names (`Conv/weights`, `BatchNorm/moving_mean`),
so TensorFlow 1.15 checkpoints load. One alias makes its batch_norm work on TensorFlow 2.15:
tensorflow.python.layers.normalization loads its layer class lazily from `tf_keras`, a package
TensorFlow 2.15 does not need; the same class is Keras 2.15's keras.src.legacy_tf_layers.normalization.
And tf_slim's own modules see tensorflow.python through the TF1 view (python_view.PythonView), so the
TensorFlow 1.15 internals it uses (`ops.Tensor`) resolve as they do for scripts.
"""

import importlib
import importlib.util
import sys

from npu_sim_bridge.tf1compat.python_view import python_view

_loaded = False


def _alias_legacy_normalization():
    """Point tensorflow.python.layers.normalization at Keras 2.15's legacy TF layers when tf_keras is absent."""
    if importlib.util.find_spec("tf_keras") is not None:
        return
    legacy_module = importlib.import_module("tensorflow.python.layers.normalization")
    legacy_module.normalization = importlib.import_module("keras.src.legacy_tf_layers.normalization")


def tf_slim_module(name="tf_slim"):
    """The tf_slim module `name` (tf_slim, tf_slim.layers, tf_slim.nets, ...), ready for TensorFlow 2.15."""
    global _loaded
    if not _loaded:
        try:
            importlib.import_module("tf_slim")
        except ModuleNotFoundError as error:
            raise ModuleNotFoundError(
                "tf.contrib.slim and tf.contrib.layers are provided by the tf-slim package, which is not installed: "
                "pip install tf-slim==1.1.0", name="tf_slim") from error
        _alias_legacy_normalization()
        _loaded = True
    module = importlib.import_module(name)
    _view_tensorflow_internals()
    return module


_patched = set()


def _view_tensorflow_internals():
    """Give every loaded tf_slim module the TF1 views of the tensorflow.python modules it imported."""
    for module_name, module in list(sys.modules.items()):
        if module_name in _patched or not (module_name == "tf_slim" or module_name.startswith("tf_slim.")):
            continue
        _patched.add(module_name)
        for key, value in list(vars(module).items()):
            viewed = python_view(value)
            if viewed is not value:
                setattr(module, key, viewed)


# tf.contrib.<path> -> the tf_slim module TensorFlow 1.15's module became.
DEEP_MODULES = {
    "slim.python.slim": "tf_slim",
    "slim.python.slim.nets": "tf_slim.nets",
    "slim.python.slim.data": "tf_slim.data",
    "slim.python.slim.learning": "tf_slim.learning",
    "slim.python.slim.evaluation": "tf_slim.evaluation",
    "slim.python.slim.model_analyzer": "tf_slim.model_analyzer",
    "slim.python.slim.queues": "tf_slim.queues",
    "slim.python.slim.summaries": "tf_slim.summaries",
    "slim.nets": "tf_slim.nets",
    "layers.python.layers": "tf_slim.layers",
    "framework.python.ops.arg_scope": "tf_slim.ops.arg_scope",
    "framework.python.ops.variables": "tf_slim.ops.variables",
    "metrics.python.ops.metric_ops": "tf_slim.metrics.metric_ops",
    "metrics.python.metrics": "tf_slim.metrics",
    "training.python.training.training": "tf_slim.training.training",
    "training.python.training.evaluation": "tf_slim.training.evaluation",
    "losses.python.losses": "tf_slim.losses",
}


def framework_ops_names():
    """tf.contrib.framework.python.ops: its arg_scope and variables modules, and their names."""
    return {"arg_scope": tf_slim_module("tf_slim.ops.arg_scope"), "variables": tf_slim_module("tf_slim.ops.variables")}


# tf.contrib.<path> -> (names, bases) of a module TensorFlow 1.15 had whose names now live in several modules.
DEEP_COMBINED = {
    "framework.python.ops": (framework_ops_names, lambda: framework_bases()),
}


def slim_names():
    """The names tf.contrib.slim had beyond tf_slim's own (its layers' utils module, nets)."""
    return {
        "utils": tf_slim_module("tf_slim.layers.utils"),
        "nets": tf_slim_module("tf_slim.nets"),
    }


def framework_bases():
    """The tf_slim modules that hold tf.contrib.framework's arg_scope and variable helpers."""
    return (tf_slim_module("tf_slim.ops.arg_scope"), tf_slim_module("tf_slim.ops.variables"))
