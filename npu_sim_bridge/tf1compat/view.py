"""The module objects a TensorFlow 1.15 script sees: `tensorflow` (tf.compat.v1 + tf.contrib) and tensorflow.python."""

import importlib
import sys
import types

import tensorflow as _tf

from npu_sim_bridge.tf1compat import internals
from npu_sim_bridge.tf1compat.errors import TF1AttributeError

_V1 = _tf.compat.v1


class _Overlay(types.ModuleType):
    """A module that is `base` except for a few names (tf.compat with v1 -> the TF1 API); `lazy`: names computed
    on first use (tf.compat.v2.keras as a view)."""

    def __init__(self, name, base, overrides, lazy=None):
        super().__init__(name, getattr(base, "__doc__", None))
        self.__dict__["_npu_sim_base"] = base
        self.__dict__["_npu_sim_lazy"] = dict(lazy or {})
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        lazy = self.__dict__["_npu_sim_lazy"]
        if name in lazy:
            value = self.__dict__[name] = lazy.pop(name)()
            return value
        return getattr(self.__dict__["_npu_sim_base"], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_npu_sim_base"])) | {k for k in self.__dict__ if not k.startswith("_")})


def _import_submodule(module_name):
    """importlib.import_module(module_name), or None when that very module does not exist."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            return None
        raise


class PythonView(types.ModuleType):
    """tensorflow.python.<...> (and Keras modules) as TF 1.15 scripts know it.

    The real module's names first; then the TF 1.15 names TensorFlow 2.15 moved or dropped
    (internals.py); then its submodules, imported on first use as `from ... import submodule` does
    under plain Python. Submodules come back as views too. Assignments go to the real module.
    """

    def __init__(self, real):
        super().__init__(real.__name__, real.__doc__)
        self.__dict__["_npu_sim_real"] = real
        for attr in ("__file__", "__path__", "__spec__", "__package__"):
            if hasattr(real, attr):
                self.__dict__[attr] = getattr(real, attr)

    def __getattr__(self, name):
        if name == "__all__":
            return self._npu_sim_star_names()
        if name.startswith("__"):
            raise AttributeError(name)
        real = self.__dict__["_npu_sim_real"]
        if name == "keras" and real.__name__ == "tensorflow.python":
            return python_view(importlib.import_module("keras.src"))  # TF 1.15's tf.keras is keras 2.15's keras.src
        missing = object()  # a module attribute may be None (keras.src.applications' `layers`): not the same
        value = getattr(real, name, missing)
        if value is missing:
            value = internals.lookup(real.__name__, name, missing)
        if value is missing and hasattr(real, "__path__"):
            value = _import_submodule(f"{real.__name__}.{name}") or missing
        if value is missing:
            value = _legacy_keras_twin(real.__name__, name)
            if value is None:
                raise AttributeError(f"module {real.__name__!r} has no attribute {name!r}")
        return python_view(value)

    def __setattr__(self, name, value):
        setattr(self.__dict__["_npu_sim_real"], name, value)

    def _npu_sim_star_names(self):
        """What `from <this module> import *` binds: the real module's own star names (its __all__, else its
        public names), and the public TF 1.15 names internals.py adds to it."""
        real = self.__dict__["_npu_sim_real"]
        added = [name for name in internals.names(real.__name__) if not name.startswith("_")]
        twin = _legacy_keras_twin_module(real.__name__)  # what Keras 2.15 dropped, from TensorFlow's own copy
        from_twin = [name for name in _star_names(twin) if getattr(twin, name, None) is not None] if twin else []
        return list(dict.fromkeys([*_star_names(real), *added, *from_twin]))

    def __dir__(self):
        real = self.__dict__["_npu_sim_real"]
        return sorted(set(dir(real)) | set(internals.names(real.__name__)))

    def __repr__(self):
        return f"<module {self.__name__!r} (TensorFlow 1.15 view of TensorFlow {_tf.__version__})>"


_views = {}


def _star_names(module):
    """What `from module import *` binds of a plain module: its __all__, else its public names."""
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [name for name in vars(module) if not name.startswith("_")]


def _legacy_keras_twin_module(module_name):
    """TensorFlow 2.15's own legacy copy tensorflow.python.keras.<path> of keras.src.<path>, or None."""
    if module_name != "keras.src" and not module_name.startswith("keras.src."):
        return None
    try:
        return importlib.import_module("tensorflow.python.keras" + module_name[len("keras.src"):])
    except ImportError:
        return None


def _legacy_keras_twin(module_name, name):
    """For keras.src.<path>.<name> that Keras 2.15 lacks: TensorFlow 2.15's own legacy copy,
    tensorflow.python.keras.<path>.<name>, as plain `python` imports it; None when that has none either."""
    twin = _legacy_keras_twin_module(module_name)
    if twin is None:
        return None
    twin_name = twin.__name__
    value = getattr(twin, name, None)
    if value is None and hasattr(twin, "__path__"):
        try:
            value = _import_submodule(f"{twin_name}.{name}")
        except ImportError:
            value = None
    return value


# Packages whose modules a TF1 script reaches through the view: TensorFlow's internals, and Keras 2.15 where
# TensorFlow 1.15 had tensorflow.python.keras / tf.keras.
VIEWED_PACKAGES = ("tensorflow.python", "keras.src", "keras.api")


def python_view(value):
    """`value`, or the PythonView of it when it is a module of tensorflow.python or Keras (VIEWED_PACKAGES)."""
    if not isinstance(value, types.ModuleType) or isinstance(value, PythonView):
        return value
    name = getattr(value, "__name__", "")
    if not any(name == package or name.startswith(package + ".") for package in VIEWED_PACKAGES):
        return value
    view = _views.get(name)
    if view is None or view.__dict__["_npu_sim_real"] is not value:
        view = _views[name] = PythonView(value)
    return view


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

        tools = _import_submodule("tensorflow.tools") or types.ModuleType("tensorflow.tools")
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
