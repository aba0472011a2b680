"""What the simulator changes in a Session as it is created: one wrapper of BaseSession.__init__, ordered hooks.

Three concerns shape a new Session's target and config, each in the module that owns it, each as a
hook `hook(session, target, config) -> (target, config)` run in this order:

    ALL_SESSIONS  runtime/session.py: enable_npu_for_all_sessions() gives every tf.compat.v1.Session and
                  InteractiveSession the NpuOptimizer (on a copy of its config), opt-in;
    ROUTING       runtime/hccl/cluster.py: with RANK_SIZE > 1, a Session with an empty target runs on this
                  rank's TensorFlow server;
    GUARD         native/session_guard.py: a config naming NpuOptimizer lets graphs of any size reach the
                  rewrite, or the Session is refused when the shim is not loaded.

The wrapper is put on BaseSession.__init__ now if TensorFlow's session module is loaded, else as soon as
it is (importing npu_sim_bridge does not import TensorFlow). Every Session, MonitoredSession, Estimator
and Keras session goes through it. A hook that raises refuses the Session with its message.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading

from npu_sim_bridge.graph.attr_names import HOOKS_MARK

ALL_SESSIONS, ROUTING, GUARD = 10, 20, 30

_SESSION_MODULE = "tensorflow.python.client.session"
_lock = threading.RLock()
_hooks: dict[str, tuple[int, object]] = {}  # name -> (order, hook)


def add(name: str, order: int, hook) -> None:
    """Run `hook(session, target, config) -> (target, config)` for every Session created from now on."""
    with _lock:
        _hooks[name] = (order, hook)
        _install()


def remove(name: str) -> None:
    """Stop running the hook `name` (no error if it is not there)."""
    with _lock:
        _hooks.pop(name, None)


def active(name: str) -> bool:
    """True while the hook `name` runs for new Sessions."""
    return name in _hooks


def _apply(session, target, config):
    for _, hook in sorted(_hooks.values(), key=lambda entry: entry[0]):
        target, config = hook(session, target, config)
    return target, config


def _wrap(module) -> None:
    base = module.BaseSession
    if getattr(base.__init__, HOOKS_MARK, False):
        return
    original = base.__init__

    @functools.wraps(original)
    def __init__(self, target="", graph=None, config=None):  # noqa: N807 - the wrapped method's name
        self._session = None  # what BaseSession.__del__ reads, should a hook refuse the Session
        self._closed = True
        target, config = _apply(self, target, config)
        original(self, target, graph, config)

    setattr(__init__, HOOKS_MARK, True)
    base.__init__ = __init__


def _install() -> None:
    module = sys.modules.get(_SESSION_MODULE)
    if module is not None and hasattr(module, "BaseSession"):
        _wrap(module)
    elif not any(isinstance(finder, _SessionModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SessionModuleFinder())


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
