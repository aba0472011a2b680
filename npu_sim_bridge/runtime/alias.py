"""The opt-in `npu_bridge` import alias, and run_script (what `npu-sim run script.py args` calls).

install_alias() appends a finder to sys.meta_path that maps `npu_bridge` and its submodules (and
the `hccl.manage.api` / `hccl.split.api` modules npu_init imports) onto npu_sim_bridge, so
unmodified scripts import the simulation. It never hides a real npu_bridge: when another finder
can import `npu_bridge`, install_alias raises NpuBridgeAliasError unless called with shadow=True.
A simulated module is the npu_sim_bridge module itself (`npu_bridge.npu_init is
npu_sim_bridge.npu_init`), so classes are the same objects on both names; a real module whose
names live in several npu_sim_bridge modules becomes a module holding all of them. Importing a
part of npu_bridge the simulation lacks raises ModuleNotFoundError naming what it has. Any
`npu_bridge` import also turns TF1 graph mode on (graph_mode.py), as npu_bridge ran on TF 1.15,
and with RANK_SIZE > 1 any `npu_bridge` or `hccl` import routes Sessions to the rank's server
(runtime/hccl/cluster.py).
"""

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import traceback
import types

from npu_sim_bridge.errors import NpuSimError

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
            return
        module.__doc__ = f"{name}, simulated by npu_sim_bridge: names from {', '.join(MODULES[name])}."
        for source in sources:
            for attr, value in vars(source).items():
                if not attr.startswith("_") and not isinstance(value, types.ModuleType):
                    setattr(module, attr, value)


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


def run_script(path, argv=(), shadow=False, alias=True, tf1=False):
    """Run a Python script as `python path argv...` would, with the npu_bridge alias installed.

    The script's folder is sys.path[0], its __name__ is "__main__", sys.argv is [path, *argv];
    sys.argv and sys.path are restored afterwards. Exceptions and SystemExit from the script
    propagate (so tracebacks point at its lines). Returns the script's globals. The alias stays
    installed afterwards; uninstall_alias() removes it. alias=False runs without it.
    tf1=True (what `npu-sim run` does): the script's own `import tensorflow` gives TensorFlow 1.15's
    API while it runs, and TensorFlow's v2 behaviour is turned off for the process (runtime/tf1.py).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NpuBridgeAliasError(f"script {path!r} does not exist or is not a file")
    if alias:
        install_alias(shadow=shadow)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *argv]
    script_dir = os.path.dirname(os.path.abspath(path))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.append(script_dir)
    if tf1:
        from npu_sim_bridge.runtime.tf1 import tf1_api
    try:
        with tf1_api(path) if tf1 else contextlib.nullcontext():
            return runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def print_script_traceback(error, path, file=None):
    """Print `error`'s traceback from the script's first frame on, as `python path` prints it.

    Frames of the TF1 import plumbing (runtime/tf1.py) that end the traceback are left out, as
    Python leaves out its own import machinery.
    """
    target = os.path.abspath(path)
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    report = traceback.TracebackException(type(error), error, tb or error.__traceback__)
    tf1 = sys.modules.get("npu_sim_bridge.runtime.tf1")
    plumbing = tf1.PLUMBING_FILES if tf1 is not None else frozenset()
    frames = list(report.stack)
    while len(frames) > 1 and os.path.realpath(frames[-1].filename) in plumbing:
        frames.pop()
    report.stack = traceback.StackSummary.from_list(frames)
    print("".join(report.format()), end="", file=file or sys.stderr)


def run_command(path, argv=(), shadow=False, all_sessions=False, tf1=True):
    """`npu-sim run`: run_script (TF1 API on unless tf1=False), then the exit status `python path argv...` would give.

    With tf1=True TensorFlow's v2 behaviour is off for the rest of the process (a command's process
    ends with the script; an in-process caller that must keep TensorFlow 2 behaviour passes tf1=False).

    An exception from the script is printed as Python prints it (traceback from the script's
    frames) and gives status 1; SystemExit from the script propagates. NpuBridgeAliasError (alias
    refused, script missing) propagates for the caller to report. When no graph went through the
    NpuOptimizer, a note on stderr says so and how to get the newest adapter's every-Session behaviour.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NpuBridgeAliasError(f"script {path!r} does not exist or is not a file")
    install_alias(shadow=shadow)
    if all_sessions:
        from npu_sim_bridge.runtime.session import enable_npu_for_all_sessions

        enable_npu_for_all_sessions()
    option_error = False
    try:
        run_script(path, argv, shadow=shadow, tf1=tf1)
    except Exception as error:  # noqa: BLE001 - the script's own error, reported as `python script.py` would
        option_error = isinstance(error, NpuSimError)
        print_script_traceback(error, path)
        return 1
    finally:
        if not option_error:  # the error already says why nothing was rewritten
            _note_if_nothing_simulated(all_sessions)
    return 0


def _note_if_nothing_simulated(all_sessions):
    from npu_sim_bridge.native.entry import recent_failures
    from npu_sim_bridge.report import recent_reports

    if recent_reports() or recent_failures():
        return
    hint = "" if all_sessions else ("; the newest npu_bridge adds the NpuOptimizer to every Session, "
                                    "rerun with `npu-sim run --all-sessions` to do the same")
    print(f"npu-sim run: note: no graph of this run went through the NpuOptimizer (no Session named it){hint}",
          file=sys.stderr)
