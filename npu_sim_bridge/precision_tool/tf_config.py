"""precision_tool's tf_config helpers: session_dump_config / update_custom_op set dump, overflow and fusion keys.

    import npu_sim_bridge.precision_tool.tf_config as npu_tf_config
    config = npu_tf_config.session_dump_config(config, action="fusion_off|dump")
    npu_config = NPURunConfig(fusion_switch_file=npu_tf_config.FUSION_SWITCH_FILE)

Actions (joined with "|"): dump (enable_dump, dump_mode all, dump_path precision_data/npu/debug_0),
overflow (enable_dump_debug, dump_path precision_data/overflow), fusion_off (FUSION_OFF_FILE: every
rule that can be switched off is off), fusion_switch (FUSION_SWITCH_FILE, the per-user file you edit).
Unlike precision_tool, an unknown action is an error, and dump with overflow (one dump_path for two
things) or fusion_off with fusion_switch is refused instead of one silently winning.
The data folder is ./precision_data, or $NPU_SIM_PRECISION_DATA_DIR; FUSION_SWITCH_FILE lives in
$NPU_SIM_CONFIG_DIR, else $XDG_CONFIG_HOME/npu_sim_bridge, else ~/.config/npu_sim_bridge, and is
created, with every simulated rule "on", when missing.
"""

from __future__ import annotations

import json
import os

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

from npu_sim_bridge.config.options import NPU_OPTIMIZER_NAME
from npu_sim_bridge.fileio import OutputError, write_atomic

ACTIONS = ("dump", "overflow", "fusion_off", "fusion_switch")
DUMP_STEP = "0"
FUSION_OFF_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fusion_off.cfg")


def config_dir() -> str:
    """The per-user folder of FUSION_SWITCH_FILE."""
    explicit = os.environ.get("NPU_SIM_CONFIG_DIR")
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "npu_sim_bridge")


def data_dir() -> str:
    """precision_tool's data folder (dumps go under it)."""
    return os.path.abspath(os.environ.get("NPU_SIM_PRECISION_DATA_DIR") or "precision_data")


def npu_dump_dir() -> str:
    return os.path.join(data_dir(), "npu", "debug_0")


def overflow_dump_dir() -> str:
    return os.path.join(data_dir(), "overflow")


def ensure_fusion_switch_file(path: str | None = None) -> str:
    """Create the editable fusion switch file (every simulated rule on) if it is missing; returns its path."""
    from npu_sim_bridge.passes.fusion import all_rules

    path = path or os.path.join(config_dir(), "fusion_switch.cfg")
    if not os.path.exists(path):
        switch = {"Switch": {"GraphFusion": {}, "UBFusion": {}}}
        for rule in all_rules():
            switch["Switch"][rule.kind][rule.name] = "on"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as err:
            raise OutputError(f"cannot create the folder of the fusion switch file {path!r} ({err.strerror}); set "
                              "NPU_SIM_CONFIG_DIR (or XDG_CONFIG_HOME) to a folder you can write") from None
        write_atomic(path, json.dumps(switch, indent=4) + "\n", "fusion switch file")
    return path


FUSION_SWITCH_FILE = ensure_fusion_switch_file()


def parse_action(action) -> frozenset:
    """The set of actions in "fusion_off|dump" (None or "": none); an unknown one is a ValueError naming it."""
    if not action:
        return frozenset()
    if not isinstance(action, str):
        raise TypeError(f"action must be a string such as 'fusion_off|dump', got {type(action).__name__}")
    parts = [part.strip() for part in action.split("|") if part.strip()]
    unknown = [part for part in parts if part not in ACTIONS]
    if unknown:
        raise ValueError(f"action {action!r} has unknown part {unknown[0]!r}; the actions are "
                         f"{', '.join(ACTIONS)}, joined with '|' (e.g. 'fusion_off|dump')")
    chosen = frozenset(parts)
    for first, second, why in (("dump", "overflow", "both use the one dump_path key"),
                               ("fusion_off", "fusion_switch", "both set fusion_switch_file")):
        if first in chosen and second in chosen:
            raise ValueError(f"action {action!r} asks for {first} and {second}, but {why}; run them separately")
    return chosen


def update_custom_op(custom_op, action=None):
    """Set the NpuOptimizer keys of the actions on a RewriterConfig.CustomGraphOptimizer; returns it."""
    chosen = parse_action(action)
    parameters = custom_op.parameter_map
    if "overflow" in chosen:
        os.makedirs(overflow_dump_dir(), exist_ok=True)
        parameters["enable_dump_debug"].b = True
        parameters["dump_debug_mode"].s = b"all"
        parameters["dump_path"].s = overflow_dump_dir().encode("utf-8")
    if "dump" in chosen:
        os.makedirs(npu_dump_dir(), exist_ok=True)
        parameters["enable_dump"].b = True
        parameters["dump_mode"].s = b"all"
        parameters["dump_path"].s = npu_dump_dir().encode("utf-8")
        parameters["dump_step"].s = DUMP_STEP.encode("utf-8")
    if "fusion_off" in chosen:
        parameters["fusion_switch_file"].s = FUSION_OFF_FILE.encode("utf-8")
    if "fusion_switch" in chosen:
        parameters["fusion_switch_file"].s = ensure_fusion_switch_file(FUSION_SWITCH_FILE).encode("utf-8")
    return custom_op


def session_dump_config(session_config=None, action=None):
    """`session_config` (a new ConfigProto when None) with an NpuOptimizer set for the actions; remapping off."""
    if session_config is None:
        session_config = config_pb2.ConfigProto()
    elif not isinstance(session_config, config_pb2.ConfigProto):
        raise TypeError(f"session_dump_config expects a tf.compat.v1.ConfigProto or None, got "
                        f"{type(session_config).__name__}")
    rewrite_options = session_config.graph_options.rewrite_options
    custom_op = next((op for op in rewrite_options.custom_optimizers if op.name == NPU_OPTIMIZER_NAME), None)
    if custom_op is None:
        custom_op = rewrite_options.custom_optimizers.add()
        custom_op.name = NPU_OPTIMIZER_NAME
    custom_op.parameter_map["use_off_line"].b = True
    update_custom_op(custom_op, action)
    rewrite_options.remapping = RewriterConfig.OFF
    return session_config


def estimator_dump_config(action=None):
    """A DumpConfig for NPURunConfig(dump_config=...) doing the dump or overflow action."""
    from npu_sim_bridge.runtime.dump_config import DumpConfig

    chosen = parse_action(action)
    if "overflow" in chosen:
        os.makedirs(overflow_dump_dir(), exist_ok=True)
        return DumpConfig(enable_dump_debug=True, dump_path=overflow_dump_dir(), dump_debug_mode="all")
    if "dump" in chosen:
        os.makedirs(npu_dump_dir(), exist_ok=True)
        return DumpConfig(enable_dump=True, dump_path=npu_dump_dir(), dump_step=DUMP_STEP, dump_mode="all")
    return DumpConfig()
