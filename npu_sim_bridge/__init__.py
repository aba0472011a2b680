"""npu_sim_bridge: Ascend's TensorFlow adapter (npu_bridge) simulated on plain TensorFlow.

Importing the package builds (once, into a per-user cache) and loads the native shim that
registers the `NpuOptimizer` Grappler optimizer, so any TF1 Session, Estimator RunConfig or
Keras session whose ConfigProto names NpuOptimizer gets the rewrite. Set NPU_SIM_SKIP_NATIVE=1
to use only the offline API (`rewrite`, the `npu-sim` CLI) on a machine without a compiler.
The `npu-sim` command loads the shim only for the subcommands that run Sessions.
"""

from __future__ import annotations

import os as _os
import sys as _sys

from npu_sim_bridge.errors import (
    ConfigError,
    GraphValidationError,
    NativeBuildError,
    NpuSimError,
    OpsInfoError,
    PassError,
    UnsupportedGraphError,
)

__version__ = "0.1.0"

# The npu-sim console script: its offline subcommands need no shim (and no compiler); cli.main loads
# the shim itself for the subcommands that run Sessions.
_CLI_SCRIPT = "npu-sim"
_SKIP_NATIVE = _os.environ.get("NPU_SIM_SKIP_NATIVE", "") in ("1", "true", "yes")


# TensorFlow is the one dependency a user installs by hand; without it, say so in one line.
TENSORFLOW_MISSING = ("npu_sim_bridge needs TensorFlow, which is not installed in this Python "
                      f"({_sys.executable}): install it with `pip install tensorflow-cpu==2.15.1` (or run `make env`)")


class TensorFlowMissingError(ImportError):
    """TensorFlow cannot be found: the message says what to install."""


def tensorflow_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is None


def _started_as_module() -> bool:
    """`python -m npu_sim_bridge...` (while the package is imported to find the module, argv[0] is "-m"). The
    module run (the CLI, native.build) loads what it needs; loading the shim here would import native.build
    before runpy runs it, and runpy warns about that. `python -m` of a user's module is not this case."""
    if not _sys.argv or _sys.argv[0] != "-m":
        return False
    args = list(getattr(_sys, "orig_argv", []))
    for index, arg in enumerate(args):
        if arg.startswith("-m"):
            module = arg[2:] or (args[index + 1] if index + 1 < len(args) else "")
            return module.split(".")[0] == __name__
    return False


def _started_as_cli() -> bool:
    """The npu-sim console script or `python -m npu_sim_bridge...`: the CLI reports a missing TensorFlow itself."""
    return _started_as_module() or _os.path.basename(_sys.argv[0] if _sys.argv else "") == _CLI_SCRIPT


def _native_wanted() -> bool:
    return not _SKIP_NATIVE and not _started_as_cli()


def _one_line_warning(message, category, filename, lineno, line=None):
    """This package's warnings as one line (where, category, text), without the Python source line."""
    if getattr(category, "__module__", "").startswith(__name__ + "."):
        return f"{filename}:{lineno}: {category.__name__}: {message}\n"
    return _format_warning(message, category, filename, lineno, line)


import warnings as _warnings  # noqa: E402

if getattr(_warnings.formatwarning, "__name__", "") != "_one_line_warning":  # not twice on a reload
    _format_warning = _warnings.formatwarning
    _warnings.formatwarning = _one_line_warning

if not _started_as_cli() and tensorflow_missing():
    raise TensorFlowMissingError(TENSORFLOW_MISSING) from None


from npu_sim_bridge.envvars import apply_logging_environment as _apply_logging_environment  # noqa: E402

_apply_logging_environment()  # ASCEND_GLOBAL_LOG_LEVEL / ASCEND_SLOG_PRINT_TO_STDOUT


def enable_sessions() -> None:
    """Load the shim (NpuOptimizer for every Session that names it), guard such Sessions so that graphs of
    any size reach the rewrite, and install the Session.run profiling wrapper."""
    from npu_sim_bridge.native import load_native, session_guard
    from npu_sim_bridge.profiling.session_hook import install

    load_native()
    # The entry the shim calls, imported now rather than by the first rewrite: Ctrl-C in the first seconds
    # of the first run then meets the entry's own handling, not a half-done import with an empty reason.
    import npu_sim_bridge.native.entry  # noqa: F401
    session_guard.install(skip_native=False)
    install()


if _started_as_cli() and tensorflow_missing():
    pass  # the CLI says what to install (cli.main), rather than a traceback from the guard's import
elif _SKIP_NATIVE:
    # Without the shim, Sessions naming NpuOptimizer are refused instead of running unrewritten.
    from npu_sim_bridge.native import session_guard as _session_guard  # noqa: E402

    _session_guard.install(skip_native=True)
elif _native_wanted():
    enable_sessions()

# The offline API and the report history import TensorFlow: loaded on first use, so that
# `import npu_sim_bridge` alone (the CLI's start) does not pay for TensorFlow.
_LAZY = {
    "rewrite": ("npu_sim_bridge.api", "rewrite"),
    "clear_reports": ("npu_sim_bridge.report", "clear_reports"),
    "last_report": ("npu_sim_bridge.report", "last_report"),
    "recent_reports": ("npu_sim_bridge.report", "recent_reports"),
}


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'npu_sim_bridge' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


__all__ = [
    "ConfigError",
    "GraphValidationError",
    "NativeBuildError",
    "NpuSimError",
    "OpsInfoError",
    "PassError",
    "TensorFlowMissingError",
    "UnsupportedGraphError",
    "__version__",
    "clear_reports",
    "last_report",
    "recent_reports",
    "rewrite",
]
