"""TF1 (v1) control flow structure: the while frame of every node, found from Enter and Exit nodes."""

from __future__ import annotations

from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import ENTER_OPS, EXIT_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.graph.view import GraphView

ROOT = ""


class Frames:
    """Which v1 while frame each node runs in.

    A frame is named by its path of Enter `frame_name`s ("outer/while" then "outer/while|inner/while");
    the root frame is "". Enter and Exit nodes belong to the frame they open and close, as in
    TensorFlow's executor. `top(name)` is the outermost frame below the root, the unit that must
    stay whole when the graph is partitioned.
    """

    SEPARATOR = "|"

    def __init__(self, view: GraphView, order: list[str] | None = None):
        self._frame: dict[str, str] = {}
        self._parent: dict[str, str] = {}
        self._members: dict[str, list[str]] = {}
        self.order = order if order is not None else topological_order(view)
        if not any(node.op in ENTER_OPS for node in view.nodes()):
            return  # no v1 while loop: every node runs in the root frame
        for name in self.order:
            node = view.node(name)
            frame = self._frame_from_inputs(view, node)
            if node.op in ENTER_OPS:
                child = frame + self.SEPARATOR + _frame_name(node) if frame else _frame_name(node)
                self._parent.setdefault(child, frame)
                frame = child
            self._frame[name] = frame
            if frame:
                self._members.setdefault(self.top_of(frame), []).append(name)

    def _frame_from_inputs(self, view: GraphView, node) -> str:
        for text in node.input:
            producer = view.get(node_name(text))
            if producer is None or producer.op in NEXT_ITERATION_OPS:
                continue
            frame = self._frame.get(producer.name, ROOT)
            if producer.op in EXIT_OPS:
                return self._parent.get(frame, ROOT)
            return frame
        return ROOT

    def frame(self, name: str) -> str:
        """The full frame path of a node ("" for the root frame)."""
        return self._frame.get(name, ROOT)

    def top(self, name: str) -> str:
        """The outermost non-root frame of a node, or "" when it runs in the root frame."""
        frame = self._frame.get(name, ROOT)
        return self.top_of(frame) if frame else ROOT

    @classmethod
    def top_of(cls, frame: str) -> str:
        return frame.split(cls.SEPARATOR, 1)[0]

    def top_frames(self) -> dict[str, list[str]]:
        """Each outermost frame and every node in it (nested frames included), in topological order."""
        return self._members

    def __bool__(self) -> bool:
        return bool(self._members)


def _frame_name(node) -> str:
    if "frame_name" in node.attr:
        return node.attr["frame_name"].s.decode("utf-8", "replace")
    return node.name
