"""TensorFlow 1.15's API for migrated scripts: their own `import tensorflow` gets tf.compat.v1 (plus tf.contrib)."""

import builtins
import contextlib
import importlib
import os
import sys
import sysconfig
import threading
import types

import tensorflow as _tf

_V1 = _tf.compat.v1

# Importers whose module name starts with one of these always get the real TensorFlow.
_LIBRARY_PACKAGES = frozenset({"tensorflow", "tensorflow_estimator", "keras", "tf_keras", "absl", "numpy",
                               "google", "npu_sim_bridge"})
_SITE_DIR_NAMES = frozenset({"site-packages", "dist-packages"})
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


class TF1AttributeError(AttributeError):
    """A name TensorFlow 1.15 scripts use that the TF1 view of TensorFlow 2.15 does not have."""


# ---------------------------------------------------------------------------------------------------
# The module objects a TF1 script sees.

class _Overlay(types.ModuleType):
    """A module that is `base` except for a few names (tf.compat with v1 -> the TF1 API; tf.python with keras)."""

    def __init__(self, name, base, overrides):
        super().__init__(name, getattr(base, "__doc__", None))
        self.__dict__["_npu_sim_base"] = base
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_npu_sim_base"], name)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_npu_sim_base"])) | {k for k in self.__dict__ if not k.startswith("_")})


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
        return sorted(set(dir(_V1)) | {"contrib"} | set(self.__dict__))

    def __repr__(self):
        return f"<module 'tensorflow' (TensorFlow 1.15 API: tf.compat.v1 of TensorFlow {_tf.__version__} + tf.contrib)>"


def _tf1_attribute(module, name):
    if name == "contrib":
        from npu_sim_bridge.runtime import tf1_contrib

        return tf1_contrib.contrib_module()
    if name == "compat":
        return _Overlay("tensorflow.compat", _V1.compat, {"v1": module, "v2": _tf.compat.v2})
    if name == "python":
        return _Overlay("tensorflow.python", sys.modules["tensorflow.python"],
                        {"keras": importlib.import_module("keras.src")})
    if hasattr(_V1, name):
        return getattr(_V1, name)
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
    name = ".".join(["keras.src", *rest])
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and name.startswith(error.name):
            return None
        raise


def tf1_submodule(parts):
    """The TF1 view of `tensorflow.<parts>` as a module, or None when the TF1 view has no such module.

    Raises ModuleNotFoundError naming the module and what to use for a tf.contrib module that has no
    TensorFlow 2.15 equivalent.
    """
    if not parts:
        return tf1_module()
    if parts[0] == "contrib":
        from npu_sim_bridge.runtime import tf1_contrib

        return tf1_contrib.import_contrib(parts[1:])
    if parts[:2] == ["python", "keras"]:
        return _keras_src_module(parts[2:])
    current = tf1_module()
    for part in parts:
        try:
            current = getattr(current, part)
        except AttributeError:
            return None
        if not isinstance(current, types.ModuleType):
            return None
    return current


# ---------------------------------------------------------------------------------------------------
# Who is "the user's code": importers that are not installed libraries.

_scripts = set()
_user_code_cache = {}


def _library_dirs():
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(key)}
    dirs.add(_PACKAGE_DIR)
    return tuple(sorted(os.path.realpath(path) for path in dirs))


_LIBRARY_DIRS = _library_dirs()


def _classify(path):
    real = os.path.realpath(path)
    if real in _scripts:
        return True
    if _SITE_DIR_NAMES.intersection(real.split(os.sep)):
        return False
    return not any(real == root or real.startswith(root + os.sep) for root in _LIBRARY_DIRS)


def is_user_code(module_globals):
    """True for the globals of the script npu-sim runs and of modules that are not installed libraries.

    Installed means: under a site-packages/dist-packages folder, the standard library, or
    npu_sim_bridge itself; or a module of TensorFlow, Keras, tensorflow_estimator, absl, numpy.
    Everything else (the script's folder, folders it adds to sys.path, PYTHONPATH checkouts) is the
    user's, and gets the TF1 API.
    """
    if not module_globals:
        return False
    path = module_globals.get("__file__")
    if not isinstance(path, str):
        return False
    if str(module_globals.get("__name__", "")).partition(".")[0] in _LIBRARY_PACKAGES:
        return False
    result = _user_code_cache.get(path)
    if result is None:
        result = _user_code_cache[path] = _classify(path)
    return result


# ---------------------------------------------------------------------------------------------------
# The import hook.

_original_import = None
_lock = threading.Lock()


def _check_fromlist(module, module_name, fromlist):
    if not isinstance(module, (TF1Module, _Overlay)) and not module.__name__.startswith("tensorflow.contrib"):
        return
    for item in fromlist:
        if item == "*":
            continue
        try:
            getattr(module, item)
        except TF1AttributeError as error:
            raise ImportError(f"cannot import name {item!r} from {module_name!r}: {error}", name=module_name) from None


def _import_for_user_code(name, fromlist):
    module = tf1_submodule(name.split(".")[1:])
    if module is None:
        real = _original_import(name, None, None, fromlist, 0)
        return real if fromlist else tf1_module()
    if fromlist:
        _check_fromlist(module, name, fromlist)
        return module
    return tf1_module()


def _tf1_import(name, globals=None, locals=None, fromlist=(), level=0):  # pylint: disable=redefined-builtin
    """builtins.__import__ while the TF1 API is on: `tensorflow` imports in user code get the TF1 view."""
    if level == 0 and name.startswith("tensorflow") and (len(name) == 10 or name[10] == ".") \
            and is_user_code(globals):
        return _import_for_user_code(name, fromlist)
    return _original_import(name, globals, locals, fromlist, level)


def enable_tf1_api(script=None):
    """Give user code (see is_user_code) TensorFlow 1.15's API on `import tensorflow`; turn v2 behaviour off.

    Calls tf.compat.v1.disable_v2_behavior() (graph mode, TF1 TensorShape, reference variables,
    control flow v1), which stays in force for the process. `script`: a path that is always user code.
    """
    global _original_import
    _V1.disable_v2_behavior()
    with _lock:
        if script is not None:
            _scripts.add(os.path.realpath(script))
        _user_code_cache.clear()
        if builtins.__import__ is not _tf1_import:
            _original_import = builtins.__import__
            builtins.__import__ = _tf1_import


def disable_tf1_api():
    """Give `import tensorflow` back the real module everywhere (TF1 behaviour stays: it cannot be undone safely)."""
    global _original_import
    with _lock:
        if builtins.__import__ is _tf1_import:
            builtins.__import__ = _original_import
            _original_import = None
        _scripts.clear()
        _user_code_cache.clear()


def tf1_api_enabled():
    """True while `import tensorflow` in user code gives the TF1 API."""
    return builtins.__import__ is _tf1_import


@contextlib.contextmanager
def tf1_api(script=None):
    """enable_tf1_api(script) for the duration of a `with` block."""
    enable_tf1_api(script)
    try:
        yield tf1_module()
    finally:
        disable_tf1_api()


# Files whose frames a script's traceback leaves out when they end it (the import/attribute plumbing above).
PLUMBING_FILES = frozenset(convert(os.path.join(os.path.dirname(__file__), name))
                           for name in ("tf1.py", "tf1_contrib.py") for convert in (os.path.abspath, os.path.realpath))
