"""The module objects a TensorFlow 1.15 script sees: `tensorflow` (tf.compat.v1 + tf.contrib) and tensorflow.python."""

import importlib
import sys
import types

import tensorflow as _tf

from npu_sim_bridge.graph.attr_names import VIEW_BASE_KEY, VIEW_LAZY_KEY
from npu_sim_bridge.tf1compat.python_view import import_submodule, python_view
from npu_sim_bridge.tf1compat.errors import TF1AttributeError

_V1 = _tf.compat.v1


class _Overlay(types.ModuleType):
    """A module that is `base` except for a few names (tf.compat with v1 -> the TF1 API); `lazy`: names computed
    on first use (tf.compat.v2.keras as a view)."""

    def __init__(self, name, base, overrides, lazy=None):
        super().__init__(name, getattr(base, "__doc__", None))
        self.__dict__[VIEW_BASE_KEY] = base
        self.__dict__[VIEW_LAZY_KEY] = dict(lazy or {})
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        lazy = self.__dict__[VIEW_LAZY_KEY]
        if name in lazy:
            value = self.__dict__[name] = lazy.pop(name)()
            return value
        return getattr(self.__dict__[VIEW_BASE_KEY], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__[VIEW_BASE_KEY])) | {k for k in self.__dict__ if not k.startswith("_")})


class TF1Module(types.ModuleType):
    """`tensorflow` as a TensorFlow 1.15 script knows it: the names of tf.compat.v1, and tf.contrib."""

    def __init__(self):
        super().__init__("tensorflow", _V1.__doc__)
        self.__file__ = _tf.__file__
        self.__path__ = list(_tf.__path__)
        self.__version__ = _tf.__version__
        self.__all__ = sorted({name for name in dir(_V1) if not name.startswith("_")} | {"contrib"})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _tf1_attribute(self, name)
        self.__dict__[name] = value  # resolved once; the script's own assignments to tf.X stay its own
        return value

    def __dir__(self):
        return sorted(set(dir(_V1)) | {"contrib", "examples"} | set(self.__dict__))

    def __repr__(self):
        return f"<module 'tensorflow' (TensorFlow 1.15 API: tf.compat.v1 of TensorFlow {_tf.__version__} + tf.contrib)>"


def _tf1_attribute(module, name):
    if name == "contrib":
        from npu_sim_bridge.tf1compat import contrib

        return contrib.contrib_module()
    if name == "examples":
        from npu_sim_bridge.tf1compat import mnist

        return mnist.examples_module()
    if name == "compat":
        v2 = _Overlay("tensorflow.compat.v2", _tf.compat.v2, {}, {"keras": lambda: python_view(_tf.compat.v2.keras)})
        return _Overlay("tensorflow.compat", _V1.compat, {"v1": module, "v2": v2})
    if name == "python":
        return python_view(sys.modules["tensorflow.python"])
    if name == "tools":  # TensorFlow's own tools package, plus TensorFlow 1.15's graph_transforms
        from npu_sim_bridge.tf1compat import graph_transforms

        tools = import_submodule("tensorflow.tools") or types.ModuleType("tensorflow.tools")
        return _Overlay("tensorflow.tools", tools, {}, {"graph_transforms": graph_transforms.graph_transforms_module})
    if hasattr(_V1, name):
        return python_view(getattr(_V1, name))  # tf.keras (keras.api) as a view: TF 1.15 names kept
    real_submodule = sys.modules.get(f"tensorflow.{name}")
    if isinstance(real_submodule, types.ModuleType):
        return real_submodule  # tf.core, tf.compiler, ...: TensorFlow's own packages, as in 1.15
    hint = ""
    if hasattr(_tf, name):
        hint = (f"; TensorFlow 2 has tf.{name}: write tf.compat.v2.{name}, or run a script written for "
                "TensorFlow 2 with `npu-sim run --tf2`")
    raise TF1AttributeError(
        f"module 'tensorflow' has no attribute {name!r} (npu-sim run gives this script TensorFlow 1.15's API, "
        f"tf.compat.v1 of TensorFlow {_tf.__version__}, which has no {name!r}){hint}")


_tf1_module = None


def tf1_module():
    """The `tensorflow` module a TF1 script sees (one per process); creating it changes nothing global."""
    global _tf1_module
    if _tf1_module is None:
        _tf1_module = TF1Module()
    return _tf1_module


def _keras_src_module(rest):
    """TensorFlow 1.15's tensorflow.python.keras.<rest> is keras 2.15's keras.src.<rest>; None when it has none."""
    return _submodule_at(python_view(importlib.import_module("keras.src")), rest)


def _submodule_at(current, parts):
    """The module reached from `current` through the attributes `parts`; None if one is missing or not a module."""
    for part in parts:
        try:
            current = getattr(current, part)
        except AttributeError:
            return None
        if not isinstance(current, types.ModuleType):
            return None
    return current


def tf1_submodule(parts):
    """The TF1 view of `tensorflow.<parts>` as a module, or None when the TF1 view has no such module.

    Raises ModuleNotFoundError naming the module and what to use for a tf.contrib module that has no
    TensorFlow 2.15 equivalent.
    """
    if not parts:
        return tf1_module()
    if parts[0] == "contrib":
        from npu_sim_bridge.tf1compat import contrib

        return contrib.import_contrib(parts[1:])
    if parts[:2] == ["python", "keras"]:
        return _keras_src_module(parts[2:])
    return _submodule_at(tf1_module(), parts)
