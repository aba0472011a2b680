"""NpuOptimizer configuration: the registry of parameter_map keys and parsing them into validated Options."""

from npu_sim_bridge.config.registry import (
    KEYS,
    Key,
    effective_precision_mode,
    is_mix_precision,
    parse_dump_steps,
    parse_pass_list,
)
from npu_sim_bridge.config.options import (
    NpuSimConfigWarning,
    Options,
    from_any,
    from_config_proto,
    from_dict,
    parse_parameter_map,
)

__all__ = [
    "Key",
    "KEYS",
    "Options",
    "parse_parameter_map",
    "from_dict",
    "from_config_proto",
    "from_any",
    "effective_precision_mode",
    "is_mix_precision",
    "parse_dump_steps",
    "parse_pass_list",
    "NpuSimConfigWarning",
]
