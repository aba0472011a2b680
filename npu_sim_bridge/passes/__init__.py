"""Graph passes and the pipeline that runs the ones the options ask for.

  base.py              the pass contract: GraphPass (reads / requires / produces), PassContext, and the checks
                       that raise PassContractError when a declared result is missing
  results.py           the typed results passes hand on (Placement, NpuPortDtypes) and PipelineResult
  pipeline.py          runs the selected passes in order over one GraphView
  support.py           the device-candidate test (the capability check) fusion, placement and partition read
  customize_dtypes.py  customize_dtypes: per-node dtypes and precision lists from the user's file
  fusion/              graph and UB fusion rules, fusion_switch_file
  placement/           host or device per node, with the reason; publishes Placement and Proposed
  precision/           precision modes: lists, dtype decisions, the Casts and float16 emulation
  partition/           device segments proposed (cluster.py), carried over later edits (carry.py), outlined into
                       GeOp calls (pass_.py)
  layout/, dump/       the CPU layout rewrite, and enable_dump instrumentation

Attribute names the passes write are in graph/attr_names.py; op categories in graph/op_categories.py.
"""

from npu_sim_bridge.passes.base import GraphPass, ItemInfo, PassContext, PassResult
from npu_sim_bridge.passes.pipeline import PipelineResult, available_passes, run_pipeline

__all__ = [
    "GraphPass",
    "ItemInfo",
    "PassContext",
    "PassResult",
    "PipelineResult",
    "available_passes",
    "run_pipeline",
]
