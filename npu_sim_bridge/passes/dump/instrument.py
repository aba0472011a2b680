"""Adds to one GeOp body the run counter and, per tensor, the nodes that dump it or check it for overflow.

Each dumped tensor gets its own write and each checked output its own check, placed next to the
tensor (same while frame, same cond branch; places.py): a tensor the run did not compute stops only
its own nodes, never the others'. A dump write passes the tensor through a `Switch` on "this step is
in dump_step", so it is dead (and writes nothing) at other steps. An overflow check computes, every
step, "the output (in the dtype the NPU holds it) has non-finite values while every float input of
the op is finite" and writes the number of non-finite values only where that holds. Each cond branch
a dumped tensor depends on also writes a marker file when it runs at a dumped step, so a reader can
tell "branch not taken" from a lost file. Inside a while frame each turn writes its own file.
"""

from __future__ import annotations

import collections
import os

from tensorflow.core.framework import attr_value_pb2, types_pb2

from npu_sim_bridge.config import parse_dump_steps
from npu_sim_bridge.graph.op_categories import ENTER_OPS, EXIT_OPS, NEXT_ITERATION_OPS, V1_CONTROL_FLOW_OPS
from npu_sim_bridge.graph.outline import function_library
from npu_sim_bridge.graph.ports import input_ports, output_ports
from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.passes.base import PassContext
from npu_sim_bridge.passes.dump import layout, origins
from npu_sim_bridge.passes.dump.kinds import dtype_name, overflow_kind
from npu_sim_bridge.passes.dump.npy_graph import DUMPABLE, NodeMaker, as_npu_value, type_attr, write_npy, write_op
from npu_sim_bridge.passes.dump.places import BodyPlaces, FrameValues
from npu_sim_bridge.passes.fusion.marks import fused_from, fusion_rules
from npu_sim_bridge.passes.results import NpuPortDtypes

SCOPE = origins.SCOPE
_SKIPPED_OPS = frozenset({"_Arg", "_Retval", "Const", "NoOp", "Placeholder", "PlaceholderWithDefault",
                          "ControlTrigger"})
# Ops that move a value across a while frame's edge: their output repeats a tensor dumped in the other frame
# (and Exit's lives outside the frame its node belongs to), so they are not dumped. The other v1 plumbing
# (Switch, Merge, LoopCond) is dumped, outputs only (a dead Switch port says "branch not taken"), and is
# not checked for overflow: it computes nothing.
_FRAME_EDGE_OPS = ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS
_FLOAT = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16, types_pb2.DT_DOUBLE})
_INT32, _INT64, _BOOL, _STRING = types_pb2.DT_INT32, types_pb2.DT_INT64, types_pb2.DT_BOOL, types_pb2.DT_STRING


class Instrumenter:
    """Instruments the GeOp bodies of one graph and collects what the manifest lists."""

    def __init__(self, ctx: PassContext, folder: str):
        from npu_sim_bridge.passes.precision.plan import mode_info
        from npu_sim_bridge.passes.precision.marks import PRECISION_ATTR, setting

        self.ctx = ctx
        self.view = ctx.view
        self.folder = folder
        self.options = ctx.options
        self.functions = function_library(ctx.view)
        self.npu_dtypes = ctx.result(NpuPortDtypes) or {}
        mode = mode_info(ctx.options)
        # Marked as precision-processed, so that Grappler's later runs on these bodies leave them alone.
        self.marks = {PRECISION_ATTR: attr_value_pb2.AttrValue(s=setting(mode.mode, mode.emulate).encode())}
        self.dump_on = bool(ctx.options.get("enable_dump"))
        self.check_on = bool(ctx.options.get("enable_dump_debug"))
        self.mode = ctx.options.get("dump_mode") or "output"
        self.debug_mode = ctx.options.get("dump_debug_mode") or "all"
        self.steps = parse_dump_steps(ctx.options.get("dump_step") or "")
        self.order = 0
        self.tensors: list[dict] = []
        self.overflow: dict[str, list[dict]] = {}
        self.branches: list[dict] = []
        self.writer = write_op(ctx.item.id)

    # ------------------------------------------------------------------ per GeOp
    def instrument(self, geop: str) -> None:
        from npu_sim_bridge.passes.precision.functions import FunctionBody

        call = self.view.node(geop)
        fname = call.attr["f"].func.name
        body = FunctionBody(self.functions[fname], self.functions)
        bview = GraphView(body.graph_def)
        order = topological_order(bview)
        devices = collections.Counter(node.device for node in bview.nodes() if node.op != "_Arg")
        make = NodeMaker(bview, SCOPE, devices.most_common(1)[0][0] if devices else "", self.marks, self.writer)
        places = BodyPlaces(bview, order)
        dumped, checked = self._targets(bview, order, geop)
        dumped = dumped if self.dump_on else []
        checked = checked if self.check_on else []
        if not dumped and not checked:
            return
        body_writer = _BodyWriter(self, make, places, geop)
        for target in dumped:
            body_writer.dump(*target)
        for target in checked:
            body_writer.check(*target)
        new = body.to_function(bview, body.results)
        new.signature.is_stateful = True
        for name in body_writer.control:
            new.signature.control_output.append(name)
            new.control_ret[name] = name
        for index, existing in enumerate(self.view.graph_def.library.function):
            if existing.signature.name == fname:
                self.view.graph_def.library.function[index].CopyFrom(new)
        self.functions[fname] = new
        if self.view.op(geop) == "PartitionedCall":  # an NpuSimGeOp is stateful already
            self.view.set_op(geop, "StatefulPartitionedCall")

    def _targets(self, bview, order, geop):
        """(dumped, checked): per tensor (tensor, graph dtype, NPU dtype, rank, producer, info) to dump,
        and per float output (tensor, graph dtype, NPU dtype, its op's float inputs, info) to check."""
        from npu_sim_bridge.passes.precision.marks import ROUND_OP, is_inserted_conversion

        dumped, checked = [], []
        for name in order:
            node = bview.node(name)
            if node.op in _SKIPPED_OPS or node.op in _FRAME_EDGE_OPS:
                continue
            plumbing = node.op in V1_CONTROL_FLOW_OPS
            try:
                outputs = output_ports(node, self.functions)
                inputs = input_ports(node, self.functions)
            except UnsupportedGraphError:
                continue
            inserted = is_inserted_conversion(node)
            npu_in, npu_out = self.npu_dtypes.get(name, ((), ()))
            order_number = self.order
            self.order += 1
            info = {"op": name, "type": node.op, "order": order_number, "geop": geop,
                    "fusion": fusion_rules(node), "fused_from": [n for n, _ in fused_from(node)]}
            info.update(origins.origin(bview, node, self.view.node(geop), self.view))
            data = [text for text in node.input if not text.startswith("^")]
            info["inputs"] = [parse_input(text).node for text in data]  # compare follows what a difference feeds
            if not inserted:  # the precision pass's Casts and roundings are checked, not dumped
                ranks = _output_ranks(node)
                if self.mode in ("output", "all"):
                    for slot, port in enumerate(outputs):
                        if port.dtype in DUMPABLE and not port.is_ref:
                            npu = npu_out[slot] if slot < len(npu_out) else port.dtype
                            ref = name if slot == 0 else f"{name}:{slot}"
                            dumped.append((ref, port.dtype, npu, ranks.get(slot), name,
                                           dict(info, io="output", slot=slot)))
                if self.mode in ("input", "all") and not plumbing:
                    for slot, (text, port) in enumerate(zip(data, inputs)):
                        if port.dtype in DUMPABLE and not port.is_ref:
                            npu = npu_in[slot] if slot < len(npu_in) else port.dtype
                            ref = parse_input(text)
                            rank = _output_ranks(bview.node(ref.node)).get(ref.port) if ref.node in bview else None
                            dumped.append((text, port.dtype, npu, rank, name,
                                           dict(info, io="input", slot=slot, producer=ref.node)))
            kind = overflow_kind(node)
            if plumbing or (self.debug_mode != "all" and kind != self.debug_mode):
                continue
            sources = [(text, port.dtype, npu_in[slot] if slot < len(npu_in) else self._held(text, port.dtype))
                       for slot, (text, port) in enumerate(zip(data, inputs))
                       if port.dtype in _FLOAT and not port.is_ref]
            extra = origins.inserted_info(bview, node, data, self.view.node(geop), self.view) if inserted else {}
            for slot, port in enumerate(outputs):
                if port.dtype in _FLOAT and not port.is_ref:
                    npu = npu_out[slot] if slot < len(npu_out) else port.dtype
                    ref = name if slot == 0 else f"{name}:{slot}"
                    checked.append((ref, port.dtype, npu, sources,
                                    dict({"op": name, "type": node.op, "order": order_number, "slot": slot,
                                          "kind": kind, "fusion": info["fusion"],
                                          # a rounding kernel's float32 output holds a float16 value
                                          "dtype": "float16" if node.op == ROUND_OP else dtype_name(npu)},
                                         **extra)))
        return dumped, checked

    def _held(self, text: str, graph_dtype: int) -> int:
        """The dtype the NPU holds a tensor in, as its producer's decision says (else its graph dtype)."""
        ref = parse_input(text)
        outs = self.npu_dtypes.get(ref.node, ((), ()))[1]
        return outs[ref.port] if ref.port < len(outs) else graph_dtype


class _BodyWriter:
    """The nodes added to one body: counter, step test, shared folders, per-tensor writes and checks."""

    def __init__(self, owner: Instrumenter, make: NodeMaker, places: BodyPlaces, geop: str):
        self.owner = owner
        self.make = make
        self.places = places
        self.values = FrameValues(make, places)
        self.geop = geop
        self.control: list[str] = []
        self.step, insert = self._counter()
        self.control.append(insert)
        step_text = make.add("AsString", [self.step], name="step_text", T=type_attr(_INT64))
        self.dump_dir = self._folder(layout.DUMP_DIR, step_text)
        self.overflow_dir = self._folder(layout.OVERFLOW_DIR, step_text)
        self.pred = self._dump_this_step() if owner.steps else None
        self.branch_ids: dict[tuple[str, int], int] = {}
        self._stable: dict[str, str] = {}

    def stable(self, tensor: str, dtype: int) -> str:
        """`tensor`, copied before any update of the TF1 reference variable it reads, where it reads one.

        `Identity(VariableV2)` shares the variable's buffer, and the update ops (ApplyMomentum, Assign...)
        change that buffer in place: a dump or check reading it after the update would see the next
        step's value. The copy (Snapshot) goes before every update of the variable in this body, through
        a ControlTrigger (never dead, so a copy that did not run cannot stop an update)."""
        if tensor in self._stable:
            return self._stable[tensor]
        view = self.places.view
        variable = origins.ref_variable_read_by(view, tensor)
        if variable is None or self.places.frame(variable):
            self._stable[tensor] = tensor
            return tensor
        copy = self.make.add("Snapshot", [tensor], name="before_update", T=type_attr(dtype))
        trigger = self.make.add("ControlTrigger", ["^" + copy], name="read_before_update")
        upstream = origins.ancestors(view, parse_input(tensor).node)
        for mutator in origins.mutators(view, variable):
            if mutator not in upstream:  # an update the tensor waits for comes before it anyway
                view.add_input(mutator, "^" + trigger)
        self._stable[tensor] = copy
        return copy

    def _counter(self) -> tuple[str, str]:
        make = self.make
        table = make.add("MutableHashTableV2", name="step_counter", key_dtype=type_attr(_INT64),
                         value_dtype=type_attr(_INT64), use_node_name_sharing=False,
                         shared_name=f"npu_sim_dump_step/{layout.run_stamp()}/{self.owner.ctx.report.graph_id}/"
                                     f"{self.geop}")
        key = make.const(0, _INT64, "key")
        current = make.add("LookupTableFindV2", [table, key, key], name="step_read", Tin=type_attr(_INT64),
                           Tout=type_attr(_INT64))
        following = make.add("AddV2", [current, make.const(1, _INT64, "one")], name="next_step", T=type_attr(_INT64))
        insert = make.add("LookupTableInsertV2", [table, key, following], name="step_update",
                          Tin=type_attr(_INT64), Tout=type_attr(_INT64))
        step = make.add("Identity", [current, "^" + insert], name="step", T=type_attr(_INT64))
        return step, insert

    def _folder(self, kind: str, step_text: str) -> str:
        prefix = os.path.join(self.owner.folder, kind) + "/" + layout.STEP_PREFIX
        return self.make.add("StringJoin", [self.make.const(prefix, _STRING, "folder"), step_text,
                                            self.make.const("/", _STRING, "slash")], name=f"{kind}_dir", N=3,
                             separator="")

    def _dump_this_step(self) -> str:
        make, steps = self.make, self.owner.steps
        low = make.const([lo for lo, _ in steps], _INT64, "first_steps")
        high = make.const([hi for _, hi in steps], _INT64, "last_steps")
        inside = make.add("LogicalAnd", [make.add("GreaterEqual", [self.step, low], T=type_attr(_INT64)),
                                         make.add("LessEqual", [self.step, high], T=type_attr(_INT64))])
        return make.add("Any", [inside, make.const(0, _INT32, "axis")], name="dump_this_step", keep_dims=False,
                        Tidx=type_attr(_INT32))

    def _path(self, frame: str, folder: str, name: str, suffix: str) -> tuple[str, bool]:
        """The file path as a string tensor in `frame`, and whether it names the frame's turn."""
        parts = [self.values.into(frame, folder, _STRING), self.values.const(frame, name, _STRING, "file")]
        turn = self.values.iteration_text(frame) if frame else None
        if turn is not None:
            parts.append(turn)
        parts.append(self.values.const(frame, suffix, _STRING, "suffix"))
        return self.make.add("StringJoin", parts, name="path", N=len(parts), separator=""), turn is not None

    def _gated(self, frame: str, tensor: str, dtype: int, control=()) -> str:
        """`tensor`, live only at the steps dump_step asks for (and when the op's control inputs ran)."""
        if self.pred is None and not control:
            return tensor
        if self.pred is None:
            return self.make.add("Identity", [tensor] + ["^" + c for c in control], name="gate", T=type_attr(dtype))
        switch = self.make.add("Switch", [tensor, self.values.into(frame, self.pred, _BOOL)]
                               + ["^" + c for c in control], name="gate", T=type_attr(dtype))
        return f"{switch}:1"

    # ------------------------------------------------------------------ dumps
    def dump(self, tensor, graph_dtype, npu, rank, op, info) -> None:
        frame = self.places.frame(op)
        control = [text[1:] for text in self.places.view.node(op).input if text.startswith("^")] \
            if info["io"] == "input" else []
        gated = self._gated(frame, self.stable(tensor, graph_dtype), graph_dtype, control)
        value, dtype = as_npu_value(self.make, gated, graph_dtype, npu)
        stem = layout.stem(info["order"], info["io"], info["slot"])
        path, per_turn = self._path(frame, self.dump_dir, stem, ".npy")
        self.control.append(write_npy(self.make, value, dtype, rank, path,
                                      const=lambda v, d, n: self.values.const(frame, v, d, n)))
        entry = dict(info, file=stem + ".npy", dtype=dtype_name(npu), graph_dtype=dtype_name(graph_dtype),
                     stored_dtype=dtype_name(dtype))
        if frame:
            entry.update(frame=frame, per_iteration=per_turn)
        branches = sorted(self.places.branches(tensor))
        if info["io"] == "input":
            branches = sorted(set(branches) | self.places.branches(op))
        if branches:
            entry["branches"] = [self._branch(switch, port, frame) for switch, port in branches]
        self.owner.tensors.append(entry)

    def _branch(self, switch: str, port: int, frame: str) -> int:
        """The id of a cond branch in the manifest; its marker is written when it runs at a dumped step."""
        key = (switch, port)
        if key not in self.branch_ids:
            number = len(self.owner.branches)
            self.branch_ids[key] = number
            switch_frame = self.places.frame(switch)
            dtype = self.places.view.node(switch).attr["T"].type  # RefSwitch: its base type
            gated = self._gated(switch_frame, f"{switch}:{port}" if port else switch, dtype)
            ran = self.make.add("Identity", [gated], name="branch_ran", T=type_attr(dtype))  # dead when not taken
            mark = self.make.add("Identity", [self.values.const(switch_frame, "", _STRING, "empty"), "^" + ran],
                                 name="taken", T=type_attr(_STRING))
            path, _ = self._path(switch_frame, self.dump_dir, layout.branch_stem(number), layout.BRANCH_SUFFIX)
            self.control.append(self.make.add(self.make.writer, [path, mark], name="branch_taken"))
            self.owner.branches.append({"id": number, "switch": switch, "port": port, "geop": self.geop,
                                        "frame": switch_frame})
        return self.branch_ids[key]

    # ------------------------------------------------------------------ overflow checks
    def check(self, tensor, graph_dtype, npu, sources, info) -> None:
        make = self.make
        frame = self.places.frame(info["op"])
        value, dtype = as_npu_value(make, self.stable(tensor, graph_dtype), graph_dtype, npu)
        count = self._count_nonfinite(frame, value, dtype)
        zero = self.values.const(frame, 0, _INT64, "zero64")
        flag = make.add("Greater", [count, zero], name="overflowed", T=type_attr(_INT64))
        for text, source_dtype, source_npu in sources:  # overflowed here: its inputs were finite
            source, held = as_npu_value(make, self.stable(text, source_dtype), source_dtype, source_npu)
            finite = make.add("Equal", [self._count_nonfinite(frame, source, held), zero], name="finite",
                              T=type_attr(_INT64))
            flag = make.add("LogicalAnd", [flag, finite], name="overflowed")
        switch = make.add("Switch", [count, flag], name="if_overflowed", T=type_attr(_INT64))
        stem = layout.stem(info["order"], "output", info["slot"])
        path, per_turn = self._path(frame, self.overflow_dir, stem, ".npy")
        self.control.append(write_npy(make, f"{switch}:1", _INT64, 0, path,
                                      const=lambda v, d, n: self.values.const(frame, v, d, n)))
        entry = dict(info, file=stem + ".npy")
        if frame:
            entry.update(frame=frame, per_iteration=per_turn)
        self.owner.overflow.setdefault(self.geop, []).append(entry)

    def _count_nonfinite(self, frame: str, value: str, dtype: int) -> str:
        """The number of inf/nan values of `value` (int64 scalar). Counted as the rows of Where, whose
        length is known only at run time: a reduction over axes would trust the static shape, and
        Grappler folds by it, while a rewritten body can carry a stale one (a scalar annotated [n])."""
        make = self.make
        nonfinite = make.add("LogicalNot", [make.add("IsFinite", [value], T=type_attr(dtype))], name="nonfinite")
        lifted = make.add("ExpandDims", [nonfinite, self.values.const(frame, 0, _INT32, "axis")], name="lifted",
                          T=type_attr(_BOOL), Tdim=type_attr(_INT32))  # Where takes no scalar
        where = make.add("Where", [lifted], name="nonfinite_at", T=type_attr(_BOOL))
        shape = make.add("Shape", [where], name="nonfinite_shape", T=type_attr(_INT64), out_type=type_attr(_INT64))
        first = self.values.const(frame, [0], _INT32, "first")
        one = self.values.const(frame, [1], _INT32, "one_item")
        return make.add("StridedSlice", [shape, first, one, one], name="nonfinite_count", T=type_attr(_INT64),
                        Index=type_attr(_INT32), shrink_axis_mask=1)


def _output_ranks(node) -> dict[int, int | None]:
    if "_output_shapes" not in node.attr:
        return {}
    ranks = {}
    for slot, shape in enumerate(node.attr["_output_shapes"].list.shape):
        ranks[slot] = None if shape.unknown_rank else len(shape.dim)
    return ranks
