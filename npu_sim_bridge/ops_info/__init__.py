"""Operator library: loads the op-info JSON folder (top-level ops_info/) and answers per-op-type queries."""

from npu_sim_bridge.ops_info.library import (
    BLACK,
    BFLOAT16,
    CUBE_IR_TYPES,
    CUBE_TF_TYPES,
    DTYPES_COMPILE_TIME,
    DTYPES_LISTED,
    DTYPES_NO_FLOAT_INPUT,
    FLOAT16,
    FLOAT32,
    GRAY,
    STATUS_NO_OP_INFO,
    STATUS_NOT_COMPUTE,
    STATUS_OP_INFO,
    STATUS_UNKNOWN,
    WHITE,
    OpInfo,
    OpLibrary,
)
from npu_sim_bridge.ops_info.loader import (
    INSTALLED_DATA_DIR,
    NOT_COMPUTE_KINDS,
    OP_MAP_FILE,
    SUPPORTED_OPS_FILE,
    builtin_library_path,
    clear_cache,
    load_library,
)

__all__ = [
    "BLACK", "BFLOAT16", "CUBE_IR_TYPES", "CUBE_TF_TYPES", "DTYPES_COMPILE_TIME", "DTYPES_LISTED",
    "DTYPES_NO_FLOAT_INPUT", "FLOAT16", "FLOAT32", "GRAY", "INSTALLED_DATA_DIR", "NOT_COMPUTE_KINDS",
    "OP_MAP_FILE", "STATUS_NO_OP_INFO", "STATUS_NOT_COMPUTE", "STATUS_OP_INFO", "STATUS_UNKNOWN",
    "SUPPORTED_OPS_FILE", "WHITE", "OpInfo", "OpLibrary", "builtin_library_path", "clear_cache", "load_library",
]
