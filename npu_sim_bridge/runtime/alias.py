"""The opt-in `npu_bridge` import alias: a finder mapping npu_bridge's modules onto npu_sim_bridge (MODULES).

install_alias() appends a finder to sys.meta_path that maps `npu_bridge` and its submodules (and
the `hccl.manage.api` / `hccl.split.api` modules npu_init imports) onto npu_sim_bridge, so
unmodified scripts import the simulation. It never hides a real npu_bridge: when another finder
can import `npu_bridge`, install_alias raises NpuBridgeAliasError unless called with shadow=True.
A simulated module is the npu_sim_bridge module itself (`npu_bridge.npu_init is
npu_sim_bridge.npu_init`), so classes are the same objects on both names; a real module whose
names live in several npu_sim_bridge modules becomes a module holding all of them. Each gets the
`__all__` of star_exports.py on first import: the real module's names, never `tf` or another imported
module (npu_init keeps its own, which gives the TF 1.15 `tf`). Importing a part of npu_bridge the
simulation lacks raises ModuleNotFoundError naming what it has. Any
`npu_bridge` import also turns TF1 graph mode on (graph_mode.py), as npu_bridge ran on TF 1.15,
and with RANK_SIZE > 1 any `npu_bridge` or `hccl` import routes Sessions to the rank's server
(runtime/hccl/cluster.py).
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.runtime.star_exports import set_star_names

_RUNTIME = "npu_sim_bridge.runtime."

# Alias module -> the npu_sim_bridge modules whose public names it holds (one: that module itself).
MODULES = {
    "npu_bridge.npu_init": ("npu_sim_bridge.npu_init",),
    "npu_bridge.estimator.npu.npu_config": (_RUNTIME + "estimator", _RUNTIME + "dump_config",
                                            _RUNTIME + "config_parts", _RUNTIME + "scopes"),
    "npu_bridge.estimator.npu.npu_estimator": (_RUNTIME + "estimator",),
    "npu_bridge.estimator.npu.npu_optimizer": (_RUNTIME + "hccl.optimizers", _RUNTIME + "npu_optimizer"),
    "npu_bridge.estimator.npu.npu_convert_dropout": (_RUNTIME + "npu_convert_dropout",),
    "npu_bridge.estimator.npu.npu_dynamic_rnn": (_RUNTIME + "npu_dynamic_rnn",),
    "npu_bridge.estimator.npu.npu_plugin": (_RUNTIME + "npu_plugin",),
    "npu_bridge.estimator.npu.npu_strategy": (_RUNTIME + "npu_strategy",),
    "npu_bridge.estimator.npu_unary_ops": (_RUNTIME + "npu_unary_ops",),
    "npu_bridge.estimator.npu_aicore_ops": (_RUNTIME + "npu_aicore_ops",),
    "npu_bridge.npu_cpu.npu_cpu_ops": (_RUNTIME + "npu_cpu_ops",),
    "npu_bridge.tf_adapter": (_RUNTIME + "tf_adapter",),
    "npu_bridge.tbe.npu_cube_ops": (_RUNTIME + "tbe_cube_ops",),
    "npu_bridge.tbe.npu_vector_ops": (_RUNTIME + "tbe_vector_ops",),
    "npu_bridge.estimator.npu.npu_loss_scale_optimizer": (_RUNTIME + "loss_scale",),
    "npu_bridge.estimator.npu.npu_loss_scale_manager": (_RUNTIME + "loss_scale",),
    "npu_bridge.estimator.npu.npu_scope": (_RUNTIME + "scopes",),
    "npu_bridge.estimator.npu.npu_hook": (_RUNTIME + "hooks", _RUNTIME + "iteration_hooks"),
    "npu_bridge.estimator.npu.keras_to_npu": (_RUNTIME + "keras_to_npu",),
    "npu_bridge.estimator.npu.npu_callbacks": (_RUNTIME + "hooks",),
    "npu_bridge.estimator.npu.util": (_RUNTIME + "util",),
    "npu_bridge.estimator.npu_ops": (_RUNTIME + "npu_ops",),
    "npu_bridge.hccl.hccl_ops": (_RUNTIME + "distributed",),
    "hccl.manage.api": (_RUNTIME + "distributed",),
    "hccl.split.api": (_RUNTIME + "distributed",),
    "precision_tool.tf_config": ("npu_sim_bridge.precision_tool.tf_config",),
}
ROOTS = ("npu_bridge", "hccl", "precision_tool")


def _packages():
    packages = set()
    for name in MODULES:
        parts = name.split(".")
        packages.update(".".join(parts[:end]) for end in range(1, len(parts)))
    return frozenset(packages)


PACKAGES = _packages()


class NpuBridgeAliasError(NpuSimError):
    """The alias cannot be installed as asked (a real npu_bridge is importable, or a script is missing)."""


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None  # the default module object; exec_module fills or replaces it

    def exec_module(self, module):
        name = module.__name__
        if name == "npu_bridge":
            from npu_sim_bridge.runtime.graph_mode import enter_tf1_graph_mode

            enter_tf1_graph_mode()
        if name in ("npu_bridge", "hccl"):
            from npu_sim_bridge.runtime.hccl.cluster import route_sessions

            route_sessions()  # RANK_SIZE > 1: Sessions run on this rank's TensorFlow server (runtime/hccl)
        if name in PACKAGES:
            module.__doc__ = f"{name}, simulated by npu_sim_bridge (install_alias)."
            return
        if name not in MODULES:
            raise ModuleNotFoundError(
                f"No module named {name!r}: npu_sim_bridge does not simulate it. The simulated npu_bridge "
                f"modules are: {', '.join(sorted(MODULES))}", name=name)
        sources = [importlib.import_module(source) for source in MODULES[name]]
        if len(sources) == 1:
            # The import system returns whatever sys.modules holds after exec_module: the module itself.
            sys.modules[name] = sources[0]
            set_star_names(name, sources[0])
            return
        module.__doc__ = f"{name}, simulated by npu_sim_bridge: names from {', '.join(MODULES[name])}."
        for source in sources:
            for attr, value in vars(source).items():
                if not attr.startswith("_") and not isinstance(value, types.ModuleType):
                    setattr(module, attr, value)
        set_star_names(name, module)


class NpuBridgeAliasFinder(importlib.abc.MetaPathFinder):
    """Finds `npu_bridge.*` (and `hccl.manage.api`, `hccl.split.api`) in npu_sim_bridge."""

    def __init__(self):
        self._loader = _AliasLoader()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in ROOTS:
            return None
        if not fullname.startswith("npu_bridge") and fullname not in MODULES and fullname not in PACKAGES:
            return None  # only the hccl modules npu_init uses, and precision_tool.tf_config, are simulated
        is_package = fullname in PACKAGES
        return importlib.machinery.ModuleSpec(fullname, self._loader, is_package=is_package)


_finder = None


def _installed_finder():
    return _finder if _finder is not None and _finder in sys.meta_path else None


def _real_npu_bridge_origin():
    """Where another finder would import npu_bridge from, or None."""
    existing = sys.modules.get("npu_bridge")
    if existing is not None and not _is_alias_module(existing):
        return getattr(existing, "__file__", None) or repr(existing)
    for finder in sys.meta_path:
        if isinstance(finder, NpuBridgeAliasFinder) or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec("npu_bridge", None)
        if spec is not None:
            return spec.origin or ", ".join(spec.submodule_search_locations or []) or repr(finder)
    return None


def _is_alias_module(module):
    spec = getattr(module, "__spec__", None)
    return spec is not None and isinstance(spec.loader, _AliasLoader)


def install_alias(shadow=False):
    """Make `import npu_bridge...` import npu_sim_bridge. Idempotent.

    shadow=False (default): raise NpuBridgeAliasError when a real npu_bridge is importable.
    shadow=True: use the simulation even then (its finder goes first, a loaded real npu_bridge is
    dropped from sys.modules).
    """
    global _finder
    real = _real_npu_bridge_origin()
    if real is not None and not shadow:
        raise NpuBridgeAliasError(
            f"a real npu_bridge is installed ({real}); the npu_bridge alias would hide it, so it is not installed. "
            "Run the script without the simulator to use the real adapter, or ask for the simulation anyway with "
            "install_alias(shadow=True) / npu-sim run --shadow-real-npu-bridge")
    if _installed_finder() is None:
        _finder = NpuBridgeAliasFinder()
        if shadow:
            sys.meta_path.insert(0, _finder)
        else:
            sys.meta_path.append(_finder)
    elif shadow and sys.meta_path[0] is not _finder:
        sys.meta_path.remove(_finder)
        sys.meta_path.insert(0, _finder)
    if shadow:
        for name in list(sys.modules):
            module = sys.modules[name]
            if name.split(".")[0] in ROOTS and not _is_alias_module(module) and \
                    not getattr(module, "__name__", "").startswith("npu_sim_bridge"):
                del sys.modules[name]  # a real npu_bridge module loaded before: the simulation replaces it


def uninstall_alias():
    """Remove the finder and the alias entries of sys.modules (the npu_sim_bridge modules stay loaded)."""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
    for name in list(sys.modules):
        if name.split(".")[0] in ROOTS:
            module = sys.modules[name]
            if _is_alias_module(module) or getattr(module, "__name__", "").startswith("npu_sim_bridge"):
                del sys.modules[name]


def alias_installed():
    """True while the alias finder is on sys.meta_path."""
    return _installed_finder() is not None
