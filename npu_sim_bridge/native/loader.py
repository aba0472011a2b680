"""Loads the native libraries once per process and says which are loaded: the NpuOptimizer shim, the name
index, the NPU op library and the GeOp kernel (their compile into the per-user cache is build.py's).

The low floors (graph/name_index.py, the passes' kernels, the runtime's NPU ops) import this module, which
imports only build.py and errors.py, so no arrow runs back up from them to the native entry or the pipeline.
"""

from __future__ import annotations

import os
import threading

from npu_sim_bridge.errors import NativeBuildError
from npu_sim_bridge.native.build import (GEOP_LIBRARY_NAME, GEOP_SOURCE, INDEX_LIBRARY_NAME, INDEX_SOURCE,
                                         OPS_LIBRARY_NAME, OPS_SOURCE, build)

_load_lock = threading.Lock()
_loaded_path: str | None = None
_ops_module = None
_geop_loaded = False
_shim_dll = None
_shim_functions: dict = {}
_name_index_type = None


def load_native() -> str:
    """Build (if needed) and load the shim once per process; returns the loaded library path."""
    global _loaded_path
    with _load_lock:
        if _loaded_path is not None:
            return _loaded_path
        import tensorflow as tf

        path = build()
        try:
            tf.load_library(path)
        except Exception as err:  # tf raises NotFoundError or OSError with the loader's text
            raise NativeBuildError(
                f"loading the NpuOptimizer shim {path} failed: {err}. Rebuild it with "
                "`python -m npu_sim_bridge.native.build --force`.") from err
        _loaded_path = path
    load_name_index()
    return path


def load_name_index():
    """Build (if needed) and import the native NameIndex once per process (load_native does, with the
    shim); returns its type (graph/name_index.py)."""
    global _name_index_type
    with _load_lock:
        if _name_index_type is None:
            from importlib.machinery import ExtensionFileLoader
            from importlib.util import module_from_spec, spec_from_loader

            path = build(source=INDEX_SOURCE, library=INDEX_LIBRARY_NAME)
            loader = ExtensionFileLoader("npu_sim_bridge._name_index", path)
            try:
                module = module_from_spec(spec_from_loader(loader.name, loader))
                loader.exec_module(module)
            except ImportError as err:
                raise NativeBuildError(
                    f"loading the name index {path} failed: {err}. Rebuild it with "
                    "`python -m npu_sim_bridge.native.build --force`.") from err
            _name_index_type = module.NameIndex
        return _name_index_type


def name_index_type():
    """The native NameIndex type when this process loaded it, else None (graph/name_index.py then uses
    its Python twin)."""
    return _name_index_type


def shim_function(name: str):
    """The kernel `name` the loaded shim exports for Python (a ctypes function of one Python object,
    called with the GIL held), or None when this process has not loaded the shim (each kernel has a
    Python twin for that case)."""
    global _shim_dll
    found = _shim_functions.get(name)
    if found is not None:
        return found
    import ctypes

    with _load_lock:
        if _loaded_path is None:
            return None
        if _shim_dll is None:
            _shim_dll = ctypes.PyDLL(_loaded_path)  # the library tf.load_library has mapped already
    function = getattr(_shim_dll, name)
    function.restype = ctypes.py_object
    function.argtypes = [ctypes.py_object]
    _shim_functions[name] = function
    return function


def native_skipped() -> bool:
    """True when NPU_SIM_SKIP_NATIVE asks to leave the native libraries out (no compiler on this machine)."""
    return os.environ.get("NPU_SIM_SKIP_NATIVE", "") in ("1", "true", "yes")


def load_npu_ops():
    """Build (if needed) and load the NPU op library once per process; returns its module of op wrappers.

    Its ops (Gelu, FastGelu and their gradients) need a C++ compiler and TensorFlow's headers, as the
    shim does, even where NPU_SIM_SKIP_NATIVE=1 left the shim out.
    """
    global _ops_module
    with _load_lock:
        if _ops_module is not None:
            return _ops_module
        import tensorflow as tf

        path = build(source=OPS_SOURCE, library=OPS_LIBRARY_NAME)
        try:
            _ops_module = tf.load_op_library(path)
        except Exception as err:  # tf raises NotFoundError or OSError with the loader's text
            raise NativeBuildError(
                f"loading the NPU op library {path} failed: {err}. Rebuild it with "
                "`python -m npu_sim_bridge.native.build --force`.") from err
        return _ops_module


def load_geop_kernel() -> None:
    """Build (if needed) and load the GeOp kernel library (NpuSimGeOp) once per process."""
    global _geop_loaded
    with _load_lock:
        if _geop_loaded:
            return
        import tensorflow as tf

        path = build(source=GEOP_SOURCE, library=GEOP_LIBRARY_NAME)
        try:
            tf.load_op_library(path)
        except Exception as err:  # tf raises NotFoundError or OSError with the loader's text
            raise NativeBuildError(
                f"loading the GeOp kernel library {path} failed: {err}. Rebuild it with "
                "`python -m npu_sim_bridge.native.build --force`, or set "
                "parameter_map['sim_geop_call'].s = b'partitioned_call'.") from err
        _geop_loaded = True
