"""Ascend environment variables: the ones the simulator honours, and the list of the ones it ignores.

Honoured:
  ASCEND_GLOBAL_LOG_LEVEL, ASCEND_SLOG_PRINT_TO_STDOUT, ASCEND_PROCESS_LOG_PATH   -> logs.py
  DUMP_GE_GRAPH, DUMP_GRAPH_LEVEL, DUMP_GRAPH_PATH                                -> graph_dump.py
  HCCL_CONNECT_TIMEOUT, HCCL_EXEC_TIMEOUT (and RANK_ID, RANK_SIZE, ...)           -> runtime/hccl
Every other Ascend variable in the environment (ASCEND_*, DUMP_*, PROFILING_*, GE_*, HCCL_*, ...) is
named once in each rewrite report, as accepted without effect.
"""

from npu_sim_bridge.envvars.ignored import HONOURED, ignored_note, ignored_variables
from npu_sim_bridge.envvars.logs import apply_logging_environment

__all__ = ["HONOURED", "apply_logging_environment", "ignored_note", "ignored_variables"]
