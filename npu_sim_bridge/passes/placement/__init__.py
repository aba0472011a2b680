"""The placement pass: host or device per node, with the reason a node stays on the host (pass_.py)."""

from npu_sim_bridge.passes.placement.pass_ import PlacementPass

__all__ = ["PlacementPass"]
