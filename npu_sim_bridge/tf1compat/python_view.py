"""tensorflow.python.<...> and Keras modules as TensorFlow 1.15 scripts know them (PythonView, python_view).

Its own module, below view.py and the tf.contrib modules that both read it (contrib_more, slim), so that
no import runs from it back up to the view of `tensorflow` that imports tf.contrib.
"""

import importlib
import types

import tensorflow as _tf

from npu_sim_bridge.graph.attr_names import VIEW_REAL_KEY
from npu_sim_bridge.tf1compat import internals


def import_submodule(module_name):
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
        self.__dict__[VIEW_REAL_KEY] = real
        for attr in ("__file__", "__path__", "__spec__", "__package__"):
            if hasattr(real, attr):
                self.__dict__[attr] = getattr(real, attr)

    def __getattr__(self, name):
        if name == "__all__":
            return self._npu_sim_star_names()
        if name.startswith("__"):
            raise AttributeError(name)
        real = self.__dict__[VIEW_REAL_KEY]
        if name == "keras" and real.__name__ == "tensorflow.python":
            return python_view(importlib.import_module("keras.src"))  # TF 1.15's tf.keras is keras 2.15's keras.src
        missing = object()  # a module attribute may be None (keras.src.applications' `layers`): not the same
        value = getattr(real, name, missing)
        if value is missing:
            value = internals.lookup(real.__name__, name, missing)
        if value is missing and hasattr(real, "__path__"):
            value = import_submodule(f"{real.__name__}.{name}") or missing
        if value is missing:
            value = _legacy_keras_twin(real.__name__, name)
            if value is None:
                raise AttributeError(f"module {real.__name__!r} has no attribute {name!r}")
        return python_view(value)

    def __setattr__(self, name, value):
        setattr(self.__dict__[VIEW_REAL_KEY], name, value)

    def _npu_sim_star_names(self):
        """What `from <this module> import *` binds: the real module's own star names (its __all__, else its
        public names), and the public TF 1.15 names internals.py adds to it."""
        real = self.__dict__[VIEW_REAL_KEY]
        added = [name for name in internals.names(real.__name__) if not name.startswith("_")]
        twin = _legacy_keras_twin_module(real.__name__)  # what Keras 2.15 dropped, from TensorFlow's own copy
        from_twin = [name for name in _star_names(twin) if getattr(twin, name, None) is not None] if twin else []
        return list(dict.fromkeys([*_star_names(real), *added, *from_twin]))

    def __dir__(self):
        real = self.__dict__[VIEW_REAL_KEY]
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
            value = import_submodule(f"{twin_name}.{name}")
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
    if view is None or view.__dict__[VIEW_REAL_KEY] is not value:
        view = _views[name] = PythonView(value)
    return view
