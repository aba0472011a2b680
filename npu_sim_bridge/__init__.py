"""npu_sim_bridge: Ascend's TensorFlow adapter (npu_bridge) simulated on plain TensorFlow.

Importing the package builds (once, into a per-user cache) and loads the native shim that
registers the `NpuOptimizer` Grappler optimizer, so any TF1 Session, Estimator RunConfig or
Keras session whose ConfigProto names NpuOptimizer gets the rewrite. Set NPU_SIM_SKIP_NATIVE=1
to use only the offline API (`rewrite`, the `npu-sim` CLI) on a machine without a compiler.
"""

from __future__ import annotations

import os as _os

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

from npu_sim_bridge.native import session_guard as _session_guard  # noqa: E402

_skip_native = _os.environ.get("NPU_SIM_SKIP_NATIVE", "") in ("1", "true", "yes")
if not _skip_native:
    from npu_sim_bridge.native import load_native as _load_native

    _load_native()
# Sessions naming NpuOptimizer: graphs of any size are rewritten, or, without the shim, refused.
_session_guard.install(skip_native=_skip_native)

from npu_sim_bridge.api import rewrite  # noqa: E402
from npu_sim_bridge.report import clear_reports, last_report, recent_reports  # noqa: E402

__all__ = [
    "ConfigError",
    "GraphValidationError",
    "NativeBuildError",
    "NpuSimError",
    "OpsInfoError",
    "PassError",
    "UnsupportedGraphError",
    "clear_reports",
    "last_report",
    "recent_reports",
    "rewrite",
]
