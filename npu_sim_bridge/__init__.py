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


def _native_wanted() -> bool:
    return not _SKIP_NATIVE and _os.path.basename(_sys.argv[0] if _sys.argv else "") != _CLI_SCRIPT


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


if _SKIP_NATIVE:
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
    "UnsupportedGraphError",
    "__version__",
    "clear_reports",
    "last_report",
    "recent_reports",
    "rewrite",
]
