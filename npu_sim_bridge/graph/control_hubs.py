"""Control inputs that many nodes share, gathered behind one NoOp (a hub).

`with tf.control_dependencies(update_ops): train_op = optimizer.minimize(loss)` gives every op the
gradient builds without a data input from inside the block the same control inputs: in ResNet-50's
training graph 734 nodes wait on the same 106 moving-average updates (554 on just those, the gradient
tuples' NoOps on one to five more), 78k of its 92k edges. A NoOp that waits on those inputs, and that
each of the nodes waits on instead, orders the graph the same way with M + N edges instead of M x N
(92k edges become 15k), and every later pass and TensorFlow's executor walk fewer edges. (TensorFlow's
dependency optimizer groups cross-device control edges behind NoOps the same way.)

What is left alone, so that nothing changes but the edge count:
- nodes of the v1 control-flow ops (a Merge counts its control inputs apart from its data inputs);
- control inputs naming a node the graph lacks (validation names the node that reads them);
- groups where a hub would not save an edge;
- shared inputs that are not one contiguous run of a node's control inputs (left on the node).
A hub sits in the frame of the nodes it waits on, as the nodes that read it do (a control input must
come from a node's own frame), and it is dead exactly when one of its inputs is, as each of them was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from tensorflow.core.framework import attr_value_pb2, node_def_pb2

from npu_sim_bridge.graph.attr_names import CONTROL_HUB_ATTR
from npu_sim_bridge.graph.op_categories import FUNCTION_EDGE_OPS, V1_CONTROL_FLOW_OPS

HUB_OP = "NoOp"
HUB_SCOPE = "npu_sim_control_hub"
MIN_SHARED = 4  # control inputs a group must share (with two readers, 8 edges become 6)
_LEFT_ALONE = V1_CONTROL_FLOW_OPS | FUNCTION_EDGE_OPS


@dataclasses.dataclass(frozen=True)
class Hub:
    """One hub: its name, the control inputs it waits on, the nodes that wait on it instead and, for
    each of them, the index of its inputs where the hub's run of control inputs starts."""

    name: str
    inputs: tuple[str, ...]
    readers: tuple[str, ...]
    starts: tuple[int, ...]

    @property
    def edges_saved(self) -> int:
        return len(self.readers) * (len(self.inputs) - 1) - len(self.inputs)

    def node(self, device: str) -> node_def_pb2.NodeDef:
        return node_def_pb2.NodeDef(name=self.name, op=HUB_OP, input=self.inputs, device=device,
                                    attr={CONTROL_HUB_ATTR: attr_value_pb2.AttrValue(i=len(self.readers))})


def plan_hubs(place: Mapping[str, int], inputs: "Sequence[str | tuple[str, ...]]",
              op_of: Callable[[str], str]) -> list[Hub]:
    """The hubs a graph should gain. `place`: every node's place in GraphDef order (its keys in that
    order); `inputs`: by place, each node's input strings as the view holds them
    (graph.table.held_inputs); `op_of` gives a node's op.

    A hub stands for a set of at least MIN_SHARED control inputs that several nodes have as their whole
    run of control inputs; a node whose control inputs hold that run among others waits on the hub for
    those too. Cheap where nothing is shared: a node is looked at only if its last input is a control input.
    """
    groups: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for name, texts in zip(place, inputs):
        count = len(texts)
        if count < MIN_SHARED or texts.__class__ is str or texts[-1][0] != "^":
            continue
        low, high = 0, count - 1  # control inputs come last: find the first one
        while low < high:
            middle = (low + high) // 2
            if texts[middle][0] == "^":
                high = middle
            else:
                low = middle + 1
        if count - low >= MIN_SHARED and op_of(name) not in _LEFT_ALONE:
            groups.setdefault(tuple(texts[low:]), []).append((name, low))
    forming: list[tuple[str, tuple[str, ...], list[tuple[str, int]]]] = []
    left: list[tuple[str, int, tuple[str, ...]]] = []
    taken: set[str] = set()
    for controls, readers in groups.items():
        if len(readers) < 2 or (len(controls) - 1) * (len(readers) - 1) <= 1 \
                or any(text[1:] not in place for text in controls):
            left.extend((name, low, controls) for name, low in readers)
            continue
        name = _free_name(place, taken, len(forming))
        taken.add(name)
        forming.append((name, controls, list(readers)))
    if not forming:
        return []
    for reader, low, controls in left:
        for _, shared, readers in forming:
            if len(controls) > len(shared) and shared[0] in controls:
                at = controls.index(shared[0])
                if controls[at:at + len(shared)] == shared:
                    readers.append((reader, low + at))
                    break
    hubs = []
    for name, shared, readers in forming:
        readers.sort(key=lambda reader: place[reader[0]])  # the first reader is the earliest in the graph
        hubs.append(Hub(name, shared, tuple(r for r, _ in readers), tuple(start for _, start in readers)))
    return hubs


def _free_name(place: Mapping[str, int], taken: set[str], index: int) -> str:
    name, again = f"{HUB_SCOPE}/{index}", 1
    while name in place or name in taken:
        name, again = f"{HUB_SCOPE}/{index}_{again}", again + 1
    return name
