"""Sessions whose config names NpuOptimizer: every graph of theirs reaches the rewrite, or none is run.

Grappler skips graphs with fewer nodes than `rewrite_options.min_graph_nodes` (4 by default), so a
small fetch such as `sess.run(lr_assign_op)` would run unrewritten. The real adapter partitions
every graph it is handed (its partition pass runs after Grappler, whatever the size), so a Session
created with a config that names NpuOptimizer and leaves min_graph_nodes at its default gets a copy
of that config with min_graph_nodes = -1: no graph is too small to be rewritten. The user's proto
is not changed. A minimum the user set on purpose is kept; the check after Grappler (in the shim)
then fails the runs of smaller graphs with a message.

With NPU_SIM_SKIP_NATIVE=1 NpuOptimizer is not registered at all, so such a Session is refused
with NativeBuildError instead: TensorFlow ignores a custom optimizer name nobody registered and
would run every graph unrewritten.

The guard wraps BaseSession.__init__, now if TensorFlow's session module is loaded, else as soon
as it is (importing npu_sim_bridge does not import TensorFlow).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys

from npu_sim_bridge.errors import NativeBuildError

_SESSION_MODULE = "tensorflow.python.client.session"
_NAME = "NpuOptimizer"

_refuse = False  # True when the shim is skipped: Sessions naming NpuOptimizer are refused


def install(skip_native: bool = False) -> None:
    """Guard the Sessions of this process; `skip_native` when the shim is not loaded (refuse them)."""
    global _refuse
    _refuse = _refuse or skip_native
    module = sys.modules.get(_SESSION_MODULE)
    if module is not None:
        _wrap(module)
    elif not any(isinstance(finder, _SessionModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleFinder())


def names_npu_optimizer(config) -> bool:
    """True if `config` (a ConfigProto or None) has a custom optimizer named NpuOptimizer."""
    if config is None:
        return False
    return any(custom.name == _NAME for custom in config.graph_options.rewrite_options.custom_optimizers)


def check_config(config) -> None:
    """NativeBuildError if the shim is skipped and `config` (a ConfigProto or None) names NpuOptimizer."""
    if _refuse and names_npu_optimizer(config):
        raise NativeBuildError(
            "NPU_SIM_SKIP_NATIVE is set, so NpuOptimizer is not registered in this process and this Session, "
            "whose config names it, would run the graph unrewritten; unset NPU_SIM_SKIP_NATIVE (the shim needs a "
            "C++ compiler and TensorFlow's headers), or remove NpuOptimizer from the config")


def every_graph_config(config):
    """`config`, or a copy of it whose min_graph_nodes lets Grappler hand NpuOptimizer graphs of any size."""
    if not names_npu_optimizer(config) or config.graph_options.rewrite_options.min_graph_nodes != 0:
        return config
    copy = type(config)()
    copy.CopyFrom(config)
    copy.graph_options.rewrite_options.min_graph_nodes = -1
    return copy


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
        original(self, target, graph, every_graph_config(config))

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
