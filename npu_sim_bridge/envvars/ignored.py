"""Which Ascend environment variables the simulator reads, and which it sees but ignores."""

from __future__ import annotations

import os

# Read by the simulator (logging and graph dumps) or by the multi-rank launcher.
HONOURED = frozenset({
    "ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_PROCESS_LOG_PATH",  # envvars/logs.py
    "DUMP_GE_GRAPH", "DUMP_GRAPH_LEVEL", "DUMP_GRAPH_PATH",                              # envvars/graph_dump.py
    "HCCL_CONNECT_TIMEOUT", "HCCL_EXEC_TIMEOUT",                                          # runtime/hccl
})

# Prefixes of the CANN toolkit's variables (set_env.sh, the adapter, GE, TBE, HCCL, profiling).
_PREFIXES = ("ASCEND_", "DUMP_", "PROFILING_", "GE_", "TE_", "TBE_", "HCCL_", "OPTION_", "ENABLE_NPU", "NPU_")
_NAMES = frozenset({"JOB_ID", "SOC_VERSION", "TUNE_BANK_PATH", "OP_NO_REUSE_MEM", "MAX_COMPILE_CORE_NUMBER"})


def ignored_variables(environ=None) -> list[str]:
    """Ascend variables set in the environment that change nothing in the simulation, sorted."""
    environ = os.environ if environ is None else environ
    found = []
    for name in environ:
        if name in HONOURED or name.startswith("NPU_SIM_"):
            continue
        if name.startswith(_PREFIXES) or name in _NAMES:
            found.append(name)
    return sorted(found)


def ignored_note(environ=None) -> str | None:
    """The one report line naming the ignored Ascend variables, or None when there are none."""
    names = ignored_variables(environ)
    if not names:
        return None
    return ("Ascend environment variables accepted without effect in simulation: " + ", ".join(names))
