"""The import hook of `npu-sim run`: a TF1 script's own `import tensorflow` gets the TF1 view (view.py)."""

import builtins
import contextlib
import importlib
import os
import sysconfig
import threading

import tensorflow as _tf

from npu_sim_bridge.tf1compat import keras_compat, packages
from npu_sim_bridge.tf1compat.errors import TF1AttributeError
from npu_sim_bridge.tf1compat.view import tf1_module, tf1_submodule

_V1 = _tf.compat.v1

# Importers whose module name starts with one of these always get the real TensorFlow.
_LIBRARY_PACKAGES = frozenset({"tensorflow", "tensorflow_estimator", "keras", "tf_keras", "absl", "numpy",
                               "google", "npu_sim_bridge", "tf_slim", "tensorflow_addons"})
_SITE_DIR_NAMES = frozenset({"site-packages", "dist-packages"})
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


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
    """Load what `from module_name import a, b` needs; a TF1 name with no equivalent becomes an ImportError."""
    for item in fromlist:
        if item == "*":
            continue
        try:
            getattr(module, item)
        except TF1AttributeError as error:
            raise ImportError(f"cannot import name {item!r} from {module_name!r}: {error}", name=module_name) from None
        except AttributeError:
            if hasattr(module, "__path__"):  # a real package: its submodule, as the import system loads it
                with contextlib.suppress(ModuleNotFoundError):
                    importlib.import_module(f"{module.__name__}.{item}")


def _import_for_user_code(name, fromlist):
    module = tf1_submodule(name.split(".")[1:])
    if module is None:
        try:
            real = _original_import(name, None, None, fromlist, 0)
        except ModuleNotFoundError as error:
            if error.name is None or not (name == error.name or name.startswith(error.name + ".")):
                raise  # a module it imports is missing, not the path itself
            raise ModuleNotFoundError(
                f"No module named {error.name!r}: neither the TensorFlow 1.15 API npu-sim run gives the script nor "
                f"TensorFlow {_tf.__version__} has it; check the module path (`npu-sim check` lists what a script "
                "imports that is missing)", name=error.name) from None
        return real if fromlist else tf1_module()
    if fromlist:
        _check_fromlist(module, name, fromlist)
        return module
    return tf1_module()


def tensorflow_name(name):
    """`name` as a module of `tensorflow` (tensorflow_core.X, TensorFlow 1.15's own package name, is tensorflow.X),
    or None when it is not one."""
    top, dot, rest = name.partition(".")
    if top in ("tensorflow", "tensorflow_core"):
        return "tensorflow" + dot + rest
    return None


def _tf1_import(name, globals=None, locals=None, fromlist=(), level=0):  # pylint: disable=redefined-builtin
    """builtins.__import__ while the TF1 API is on: `tensorflow` (and `tensorflow_core`) imports in user code get
    the TF1 view; a TensorFlow package that is not installed says which version to install (packages.py)."""
    if level == 0 and name.startswith("tensorflow") and is_user_code(globals):
        tf_name = tensorflow_name(name)
        if tf_name is not None:
            return _import_for_user_code(tf_name, fromlist)
        try:
            return _original_import(name, globals, locals, fromlist, level)
        except ModuleNotFoundError as error:
            packages.raise_with_install_hint(error)
            raise
    return _original_import(name, globals, locals, fromlist, level)


def enable_tf1_api(script=None, v1_behavior=True):
    """Give user code (see is_user_code) TensorFlow 1.15's API on `import tensorflow`; turn v2 behaviour off.

    Calls tf.compat.v1.disable_v2_behavior() (graph mode, TF1 TensorShape, reference variables,
    control flow v1), which stays in force for the process, and gives Keras models TensorFlow 1.15's
    `Model._layers` (keras_compat.py). `script`: a path that is always user code. v1_behavior=False
    leaves TensorFlow's behaviour as it is: for resolving imports (`npu-sim check`, resolve.py), which
    names do not depend on, in a process that may go on with TensorFlow 2 behaviour.
    """
    global _original_import
    if v1_behavior:
        _V1.disable_v2_behavior()
    keras_compat.add_model_attributes()
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
def tf1_api(script=None, v1_behavior=True):
    """enable_tf1_api(script, v1_behavior) for the duration of a `with` block."""
    enable_tf1_api(script, v1_behavior)
    try:
        yield tf1_module()
    finally:
        disable_tf1_api()
