"""Graph passes and the pipeline that runs the ones the options ask for."""

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
