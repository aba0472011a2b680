"""Mixed compute: decide host or device per node, then outline device segments into GeOp calls."""

from npu_sim_bridge.passes.partition.pass_ import GEOP_ATTR, IN_GEOP_ATTR, PartitionPass, PlacementPass

__all__ = ["GEOP_ATTR", "IN_GEOP_ATTR", "PartitionPass", "PlacementPass"]
