"""Where a GeOp body's nodes run (v1 while frame, cond branch) and how dump nodes get values into a frame.

A dump or check node sits next to the tensor it reads, in the same frame and branch, so a tensor the
run did not compute (a branch not taken, a loop's last turn) only stops its own writes. Values the
writes share (the step, the step test, constants) are made once in the body's root frame and enter a
while frame through an `Enter` (is_constant), once per frame. Inside a frame the writes run once per
iteration: `Frames.iteration(frame)` is a counter added as a loop variable of that frame (its value
is the turn, 0 first, in every turn the loop's condition is evaluated), and the file of a tensor in
a frame is named by the turns of every frame it is nested in.
"""

from __future__ import annotations

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.graph.control_flow import Frames
from npu_sim_bridge.graph.names import node_name, parse_input
from npu_sim_bridge.graph.op_categories import ENTER_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from npu_sim_bridge.passes.dump.npy_graph import NodeMaker, type_attr

_NO_BRANCH = frozenset()


def parent_of(frame: str) -> str:
    return frame.rsplit(Frames.SEPARATOR, 1)[0] if Frames.SEPARATOR in frame else ""


class BodyPlaces:
    """The frame and cond branches of every node of one GeOp body (`order`: the body in topological order)."""

    def __init__(self, view, order: list[str]):
        self.view = view
        self.frames = Frames(view, order)
        self.enters: dict[str, object] = {}        # frame -> an Enter node opening it (its attrs are copied)
        self.loop_conds: dict[str, str] = {}       # frame -> its LoopCond
        self._branch: dict[str, frozenset] = {}    # node -> the (Switch, port) branches it runs under
        for name in order:
            node = view.node(name)
            frame = self.frames.frame(name)
            if node.op in ENTER_OPS:
                self.enters.setdefault(frame, node)
            elif node.op == "LoopCond":
                self.loop_conds.setdefault(frame, name)
            self._branch[name] = self._branches_of(node)

    def frame(self, name: str) -> str:
        return self.frames.frame(name)

    def branches(self, tensor: str) -> frozenset:
        """The cond branches a tensor ("node" or "node:port") exists under: (Switch node, port) pairs."""
        ref = parse_input(tensor)
        found = self._branch.get(ref.node, _NO_BRANCH)
        node = self.view.get(ref.node)
        if node is not None and node.op in SWITCH_OPS and not self.is_loop_switch(node):
            found = found | {(ref.node, ref.port)}
        return found

    def is_loop_switch(self, node) -> bool:
        """A while loop's Switch (its predicate is a LoopCond): its ports are turns of a loop, not branches."""
        if len(node.input) < 2:
            return False
        predicate = self.view.get(parse_input(node.input[1]).node)
        return predicate is not None and predicate.op == "LoopCond"

    def _branches_of(self, node) -> frozenset:
        inputs = [text for text in node.input if not text.startswith("^")]
        if node.op in MERGE_OPS:  # a Merge runs when any input is there: only what all inputs share
            shared = None
            for text in inputs:
                producer = self.view.get(parse_input(text).node)
                if producer is None or producer.op in NEXT_ITERATION_OPS:
                    continue
                guard = self.branches(text)
                shared = guard if shared is None else shared & guard
            return shared or _NO_BRANCH
        found = _NO_BRANCH
        for text in node.input:
            found = found | (self.branches(text) if not text.startswith("^") else self._branch.get(node_name(text),
                                                                                                   _NO_BRANCH))
        return found


class FrameValues:
    """Root-frame values (the step, constants) made available in any while frame of the body."""

    def __init__(self, make: NodeMaker, places: BodyPlaces):
        self.make = make
        self.places = places
        self._entered: dict[tuple[str, str], str] = {}
        self._iterations: dict[str, str] = {}
        self._texts: dict[str, str] = {}

    def into(self, frame: str, tensor: str, dtype: int) -> str:
        """`tensor` (made in the root frame) as a value inside `frame`, through one Enter per frame level."""
        if not frame:
            return tensor
        key = (frame, tensor)
        if key not in self._entered:
            outer = self.into(parent_of(frame), tensor, dtype)
            self._entered[key] = self._enter(frame, outer, dtype, constant=True)
        return self._entered[key]

    def const(self, frame: str, value, dtype: int, name: str = "const") -> str:
        return self.into(frame, self.make.const(value, dtype, name), dtype)

    def _enter(self, frame: str, value: str, dtype: int, constant: bool) -> str:
        opener = self.places.enters[frame]
        return self.make.add("Enter", [value], name="enter", T=type_attr(dtype),
                             frame_name=opener.attr["frame_name"], is_constant=constant,
                             parallel_iterations=opener.attr["parallel_iterations"])

    def iteration(self, frame: str) -> str | None:
        """An int64 counter of the turns of `frame` (a loop variable added to it), or None when the
        frame's LoopCond is not in this body."""
        if frame in self._iterations:
            return self._iterations[frame]
        loop_cond = self.places.loop_conds.get(frame)
        if loop_cond is None or frame not in self.places.enters:
            self._iterations[frame] = None
            return None
        int64 = types_pb2.DT_INT64
        start = self._enter(frame, self.const(parent_of(frame), 0, int64, "zero64"), int64, constant=False)
        merge = self.make.add("Merge", [start, start], name="turn", T=type_attr(int64), N=2)
        switch = self.make.add("Switch", [merge, loop_cond], name="turn_switch", T=type_attr(int64))
        body = self.make.add("Identity", [f"{switch}:1"], name="turn_body", T=type_attr(int64))
        following = self.make.add("AddV2", [body, self.const(frame, 1, int64, "one64")], name="next_turn",
                                  T=type_attr(int64))
        back = self.make.add("NextIteration", [following], name="turn_back", T=type_attr(int64))
        self.make.view.set_input(merge, 1, back)
        self._iterations[frame] = merge
        return merge

    def iteration_text(self, frame: str) -> str | None:
        """".iter_<turn>" (nested frames: ".iter_<outer>_<inner>") as a string tensor in `frame`; None
        when a frame's turns cannot be counted in this body."""
        if frame in self._texts:
            return self._texts[frame]
        string = types_pb2.DT_STRING
        own = self.iteration(frame)
        if own is None:
            self._texts[frame] = None
            return None
        own_text = self.make.add("AsString", [own], name="turn_text", T=type_attr(types_pb2.DT_INT64))
        outer = parent_of(frame)
        if outer:
            outer_text = self.iteration_text(outer)
            if outer_text is None:
                self._texts[frame] = None
                return None
            prefix = self._enter(frame, outer_text, string, constant=True)
            parts = [prefix, self.const(frame, "_", string, "underscore"), own_text]
        else:
            parts = [self.const(frame, ".iter_", string, "iter_prefix"), own_text]
        self._texts[frame] = self.make.add("StringJoin", parts, name="turn_name", N=len(parts), separator="")
        return self._texts[frame]
