"""Control inputs that many nodes share, gathered behind one NoOp (a hub).

`with tf.control_dependencies(update_ops): train_op = optimizer.minimize(loss)` gives every op the
gradient builds without a data input from inside the block the same control inputs: in ResNet-50's
training graph 735 nodes wait on the same 106 moving-average updates, 78k of its 92k edges. A NoOp
that waits on those inputs, and that each of the nodes waits on instead, orders the graph the same
way with M + N edges instead of M x N, and every later pass and TensorFlow's executor walk fewer
edges. (TensorFlow's dependency optimizer groups cross-device control edges behind NoOps the same way.)

What is left alone, so that nothing changes but the edge count:
- nodes of the v1 control-flow ops (a Merge counts its control inputs apart from its data inputs);
- control inputs naming a node the graph lacks (validation names the node that reads them);
- groups where a hub would not save an edge.
A hub sits in the frame of the nodes it waits on, as the nodes that read it do (a control input must
come from a node's own frame), and it is dead exactly when one of its inputs is, as each of them was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from tensorflow.core.framework import attr_value_pb2, node_def_pb2

from npu_sim_bridge.graph.op_categories import FUNCTION_EDGE_OPS, V1_CONTROL_FLOW_OPS

HUB_OP = "NoOp"
HUB_SCOPE = "npu_sim_control_hub"
HUB_ATTR = "_npu_sim_control_hub"  # on every hub: how many nodes read it
MIN_SHARED = 4  # control inputs a group must share (with two readers, 8 edges become 6)
_LEFT_ALONE = V1_CONTROL_FLOW_OPS | FUNCTION_EDGE_OPS


@dataclasses.dataclass(frozen=True)
class Hub:
    """One hub: its name, the control inputs it waits on and the nodes that wait on it instead."""

    name: str
    inputs: tuple[str, ...]
    readers: tuple[str, ...]

    @property
    def edges_saved(self) -> int:
        return len(self.inputs) * len(self.readers) - len(self.inputs) - len(self.readers)

    def node(self, device: str) -> node_def_pb2.NodeDef:
        return node_def_pb2.NodeDef(name=self.name, op=HUB_OP, input=self.inputs, device=device,
                                    attr={HUB_ATTR: attr_value_pb2.AttrValue(i=len(self.readers))})


def plan_hubs(inputs: Mapping[str, list[str]], op_of: Callable[[str], str]) -> list[Hub]:
    """The hubs a graph should gain: each set of at least MIN_SHARED control inputs (its last inputs)
    that several nodes share. `inputs` maps every node to its input strings; `op_of` gives a node's op.

    Cheap where nothing is shared: a node is looked at only if its last input is a control input.
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, texts in inputs.items():
        count = len(texts)
        if count < MIN_SHARED or texts[-1][0] != "^":
            continue
        low, high = 0, count - 1  # control inputs come last: find the first one
        while low < high:
            middle = (low + high) // 2
            if texts[middle][0] == "^":
                high = middle
            else:
                low = middle + 1
        if count - low >= MIN_SHARED and op_of(name) not in _LEFT_ALONE:
            groups.setdefault(tuple(texts[low:]), []).append(name)
    hubs: list[Hub] = []
    taken: set[str] = set()
    for controls, readers in groups.items():
        if len(readers) < 2 or (len(controls) - 1) * (len(readers) - 1) <= 1:
            continue
        if any(text[1:] not in inputs for text in controls):
            continue
        name = _free_name(inputs, taken, len(hubs))
        taken.add(name)
        hubs.append(Hub(name, controls, tuple(readers)))
    return hubs


def _free_name(inputs: Mapping[str, list[str]], taken: set[str], index: int) -> str:
    name, again = f"{HUB_SCOPE}/{index}", 1
    while name in inputs or name in taken:
        name, again = f"{HUB_SCOPE}/{index}_{again}", again + 1
    return name
