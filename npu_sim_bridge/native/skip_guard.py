"""With NPU_SIM_SKIP_NATIVE=1 NpuOptimizer is not registered, so a Session whose config names it is refused.

TensorFlow ignores a custom optimizer name nobody registered and runs the graph unrewritten. So
when the shim is skipped, creating a Session whose ConfigProto names NpuOptimizer raises
NativeBuildError saying so. The check wraps BaseSession.__init__, now if TensorFlow's session
module is loaded, else as soon as it is (importing npu_sim_bridge does not import TensorFlow).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys

from npu_sim_bridge.errors import NativeBuildError

_SESSION_MODULE = "tensorflow.python.client.session"
_NAME = "NpuOptimizer"


def install() -> None:
    """Refuse NpuOptimizer Sessions in this process (called when NPU_SIM_SKIP_NATIVE is set)."""
    module = sys.modules.get(_SESSION_MODULE)
    if module is not None:
        _wrap(module)
    elif not any(isinstance(finder, _SessionModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleFinder())


def check_config(config) -> None:
    """NativeBuildError if `config` (a ConfigProto or None) names NpuOptimizer."""
    if config is None:
        return
    names = [custom.name for custom in config.graph_options.rewrite_options.custom_optimizers]
    if _NAME in names:
        raise NativeBuildError(
            "NPU_SIM_SKIP_NATIVE is set, so NpuOptimizer is not registered in this process and this Session, "
            "whose config names it, would run the graph unrewritten; unset NPU_SIM_SKIP_NATIVE (the shim needs a "
            "C++ compiler and TensorFlow's headers), or remove NpuOptimizer from the config")


def _wrap(module) -> None:
    base = module.BaseSession
    if getattr(base.__init__, "_npu_sim_guard", False):
        return
    original = base.__init__

    @functools.wraps(original)
    def __init__(self, target="", graph=None, config=None):  # noqa: N807 - the wrapped method's name
        self._session = None  # what BaseSession.__del__ reads, should the check refuse the Session
        self._closed = True
        check_config(config)
        original(self, target, graph, config)

    __init__._npu_sim_guard = True
    base.__init__ = __init__


class _SessionModuleFinder(importlib.abc.MetaPathFinder):
    """Wraps BaseSession.__init__ once TensorFlow's session module has been executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _SESSION_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _wrap(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        loader.exec_module = exec_module
        return spec
