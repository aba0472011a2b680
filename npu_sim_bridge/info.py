"""What this installation simulates: SoC, operator library, TensorFlow, the shim, Ascend variables, options that act.

`npu-sim info` prints it; `collect_info()` returns it as a dict. Nothing is compiled: the shim's path
and build key are where the cache would hold it, with whether it is built.
"""

from __future__ import annotations

import glob
import os
import platform

SIMULATED_SOC = "Ascend910"


def _soc_of(library_path: str) -> str:
    """The SoC the op-info files are for (aic-<soc>-ops-info.json), else the simulated default."""
    for path in sorted(glob.glob(os.path.join(library_path, "aic-*-ops-info.json"))):
        name = os.path.basename(path)[len("aic-"):-len("-ops-info.json")]
        return {"ascend910": "Ascend910"}.get(name, name)
    return SIMULATED_SOC


def collect_info(ops_info: str | None = None) -> dict:
    from npu_sim_bridge import __version__
    from npu_sim_bridge.config.registry import KEYS
    from npu_sim_bridge.envvars import HONOURED, ignored_variables
    from npu_sim_bridge.ops_info import load_library

    path = ops_info or os.environ.get("NPU_SIM_OPS_INFO_PATH") or None
    library = load_library(path)
    info = {
        "npu_sim_bridge": __version__,
        "python": platform.python_version(),
        "soc": _soc_of(str(library.path)),
        "ops_info": {"path": str(library.path), "files": [os.path.basename(str(f)) for f in library.files],
                     **library.counts()},
        "ascend_variables_honoured": sorted(HONOURED),
        "ascend_variables_ignored": ignored_variables(),
        "options_that_act": sorted(name for name, key in KEYS.items() if key.acts),
        "options_without_effect": sorted(name for name, key in KEYS.items() if not key.acts),
    }
    info.update(_tensorflow_and_shim())
    return info


def _tensorflow_and_shim() -> dict:
    try:
        import tensorflow as tf
    except ImportError as err:
        return {"tensorflow": f"not importable ({err})", "shim": None}
    from npu_sim_bridge.errors import NativeBuildError
    from npu_sim_bridge.native import shim_path

    try:
        path = shim_path()
    except NativeBuildError as err:
        return {"tensorflow": tf.__version__, "shim": {"error": str(err)}}
    return {"tensorflow": tf.__version__,
            "shim": {"path": path, "build_key": os.path.basename(os.path.dirname(path)),
                     "built": os.path.exists(path)}}


def format_info(info: dict) -> str:
    ops = info["ops_info"]
    lines = [
        f"npu_sim_bridge {info['npu_sim_bridge']} (Python {info['python']}, TensorFlow {info['tensorflow']})",
        f"simulated SoC: {info['soc']}",
        f"operator library: {ops['path']}",
        f"  files: {', '.join(ops['files'])}",
        f"  {ops['ops']} ops: {ops['white']} white, {ops['black']} black, {ops['gray']} gray; "
        f"{ops['supported_tf_types']} TensorFlow op types run on the device; {ops['mapped_tf_types']} TF<->IR "
        "mappings",
    ]
    shim = info.get("shim")
    if shim is None:
        lines.append("NpuOptimizer shim: TensorFlow is not importable")
    elif "error" in shim:
        lines.append(f"NpuOptimizer shim: cannot be built here: {shim['error']}")
    else:
        state = "built" if shim["built"] else "not built yet (built on first `import npu_sim_bridge`)"
        lines.append(f"NpuOptimizer shim: {shim['path']} ({state})")
        lines.append(f"  build key: {shim['build_key']}")
    lines.append("Ascend environment variables read: " + ", ".join(info["ascend_variables_honoured"]))
    ignored = info["ascend_variables_ignored"]
    lines.append("Ascend environment variables set here and ignored: " + (", ".join(ignored) if ignored else "none"))
    lines.append(f"options that act ({len(info['options_that_act'])}):")
    lines.extend(_wrapped(info["options_that_act"]))
    lines.append(f"options accepted without effect in simulation ({len(info['options_without_effect'])}):")
    lines.extend(_wrapped(info["options_without_effect"]))
    return "\n".join(lines) + "\n"


def _wrapped(names: list[str], width: int = 100) -> list[str]:
    lines, line = [], "  "
    for name in names:
        if len(line) + len(name) + 2 > width and line.strip():
            lines.append(line.rstrip(", "))
            line = "  "
        line += name + ", "
    if line.strip():
        lines.append(line.rstrip(", "))
    return lines
