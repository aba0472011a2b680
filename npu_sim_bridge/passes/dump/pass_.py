"""The "dump" pass: the ops inside each GeOp write their tensors (.npy) and float16 overflow flags at run time.

Runs last, on the GeOp bodies the partition pass made (the device ops; ops left on the host are not
dumped, as on the NPU). Into each body it adds, with TensorFlow ops only (a GeOp body cannot call
Python):
- a run counter: a MutableHashTableV2 in the device's resource manager, read and incremented once per
  run of the GeOp. A GeOp runs once per Session.run of its graph, so the counter is the step: it starts
  at 0 in each new Session, and each graph TensorFlow builds for a fetch/feed set counts its own runs
  (as the NPU's graph engine counts iterations per graph);
- enable_dump: an `If` on "step is in dump_step" whose branch writes every dumped tensor as
  <dump dir>/dump/step_<k>/<stem>.npy (layout.py), in the dtype the NPU holds it (float16 where the
  op runs in float16, also when emulated in float32);
- enable_dump_debug: per float output of a checked op an "overflowed here" flag: the output (in the
  dtype the NPU holds it) is not all finite while every float input of the op is (the adapter's
  "abnormal output from normal inputs"; an inf passed on from an earlier op does not flag again).
  dump_debug_mode picks the ops: aicore_overflow every device op but the Atomic Add ones,
  atomic_overflow only the ops whose output the NPU accumulates with Atomic Add (ATOMIC_ADD_OPS:
  reductions, segment/scatter sums, bias and filter gradients), all both. When a flag is set, an
  `If` writes the flags of that GeOp to overflow/step_<k>/<GeOp>.npy. The manifest lists the checked
  ops in graph order, so the first overflowing op of a step is the first flag set.
The writes are control outputs of the body, so the GeOp returns after they are done. The manifest
(op names, types, graph order, dtypes, fusion history, the input graph) is written at rewrite time.
TensorFlow's tfdbg2 dumps (DebugIdentityV2) were not used: they carry no step number, cannot be
limited to dump_step inside the graph, and sit in a writer buffer until Python flushes it.
"""

from __future__ import annotations

import collections
import hashlib
import os
import time

from tensorflow.core.framework import attr_value_pb2, function_pb2, types_pb2

from npu_sim_bridge.config import parse_dump_steps
from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.outline import function_library
from npu_sim_bridge.graph.ports import input_ports, output_ports
from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.base import SEEN_ATTR, GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.dump import layout
from npu_sim_bridge.passes.dump.npy_graph import DUMPABLE, NodeMaker, as_npu_value, type_attr, type_list, write_npy
from npu_sim_bridge.passes.fusion.marks import fused_from, fusion_rules
from npu_sim_bridge.passes.results import NpuPortDtypes

DUMP_ATTR = "_npu_sim_dump"          # on an instrumented GeOp call: its dump folder
SCOPE = "npu_sim_dump"
_SKIPPED_OPS = frozenset({"_Arg", "_Retval", "Const", "NoOp", "Placeholder", "PlaceholderWithDefault"})
_FLOAT = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16, types_pb2.DT_DOUBLE})


AICORE_OVERFLOW, ATOMIC_OVERFLOW = "aicore_overflow", "atomic_overflow"
# Ops whose results several AI Cores add into one output buffer with Atomic Add as the data leaves the
# unified buffer (reductions and scatter/segment sums, the bias and filter gradients that sum over the batch).
ATOMIC_ADD_OPS = frozenset({
    "Sum", "Mean", "L2Loss", "BiasAddGrad", "Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter",
    "Conv3DBackpropFilterV2", "UnsortedSegmentSum", "SegmentSum", "ScatterAdd", "ResourceScatterAdd",
    "ScatterNdAdd", "TensorScatterAdd", "SparseSegmentSum", "SparseSegmentMean",
})


def dtype_name(dtype: int) -> str:
    name = types_pb2.DataType.Name(dtype)
    return {"DT_FLOAT": "float32", "DT_HALF": "float16", "DT_DOUBLE": "float64"}.get(name, name[3:].lower())


class DumpPass(GraphPass):
    """Instrument the GeOp bodies so the device ops dump their tensors and overflow flags."""

    name = "dump"
    reads = (NpuPortDtypes,)
    description = "enable_dump / enable_dump_debug: device ops write .npy dumps and float16 overflow flags"

    def wanted(self, options) -> bool:
        return bool(options.get("enable_dump") or options.get("enable_dump_debug"))

    def run(self, ctx: PassContext) -> PassResult:
        if ctx.item.is_function:
            return PassResult(changed=False, stats={"function_body": True})
        view, report, options = ctx.view, ctx.report, ctx.options
        if any(SEEN_ATTR in node.attr or DUMP_ATTR in node.attr for node in view.nodes()):
            return PassResult(changed=False, stats={"already_instrumented": True})
        from npu_sim_bridge.passes.partition import GEOP_ATTR

        geops = [name for name in topological_order(view) if GEOP_ATTR in view.node(name).attr]
        if not geops:
            report.warn("enable_dump/enable_dump_debug: the graph has no device segment (GeOp), so no tensor is "
                        "dumped; dumps cover the ops that run on the device (run the partition pass, the default)")
            return PassResult(changed=False, stats={"geops": 0})
        folder = os.path.join(os.path.abspath(options.get("dump_path")), layout.run_stamp(), report.graph_id)
        dump = Instrumenter(ctx, folder)
        for geop in geops:
            dump.instrument(geop)
        manifest = dump.manifest()
        if not manifest["tensors"] and not manifest["overflow"]:
            return PassResult(changed=False, stats={"geops": len(geops), "tensors": 0})
        layout.write_manifest(folder, manifest)
        report.warn(f"dumps of this graph go to {folder} ({len(manifest['tensors'])} tensors of "
                    f"{len({t['op'] for t in manifest['tensors']})} device ops"
                    + (f", overflow checks on {sum(len(v) for v in manifest['overflow'].values())} tensors"
                       if options.get("enable_dump_debug") else "") + ")")
        return PassResult(changed=True, stats={"geops": len(geops), "folder": folder,
                                               "tensors": len(manifest["tensors"])})


class Instrumenter:
    """Adds the counter, dump and overflow nodes to GeOp bodies and collects the manifest."""

    def __init__(self, ctx: PassContext, folder: str):
        from npu_sim_bridge.passes.precision.decide import mode_info
        from npu_sim_bridge.passes.precision.marks import MARK_ATTR, setting

        self.ctx = ctx
        self.view = ctx.view
        self.folder = folder
        self.options = ctx.options
        self.functions = function_library(ctx.view)
        self.npu_dtypes = ctx.result(NpuPortDtypes) or {}
        mode = mode_info(ctx.options)
        # Marked as precision-processed, so that Grappler's later runs on these bodies leave them alone.
        self.marks = {MARK_ATTR: attr_value_pb2.AttrValue(s=setting(mode.mode, mode.emulate).encode())}
        self.mode = ctx.options.get("dump_mode") or "output"
        self.debug_mode = ctx.options.get("dump_debug_mode") or "all"
        self.steps = parse_dump_steps(ctx.options.get("dump_step") or "")
        self.order = 0
        self.tensors: list[dict] = []
        self.overflow: dict[str, list[dict]] = {}

    # ------------------------------------------------------------------ per GeOp
    def instrument(self, geop: str) -> None:
        from npu_sim_bridge.passes.precision.functions import FunctionBody

        call = self.view.node(geop)
        fname = call.attr["f"].func.name
        fdef = self.functions[fname]
        body = FunctionBody(fdef, self.functions)
        bview = GraphView(body.graph_def)
        devices = collections.Counter(node.device for node in bview.nodes() if node.op != "_Arg")
        make = NodeMaker(bview, SCOPE, devices.most_common(1)[0][0] if devices else "", self.marks)
        dumped, checked = self._targets(bview, geop)
        if not (self.options.get("enable_dump") and dumped) and not (self.options.get("enable_dump_debug")
                                                                     and checked):
            return
        control = []
        step, insert = self._counter(make, geop)
        control.append(insert)
        if self.options.get("enable_dump") and dumped:
            control.append(self._dump_if(make, geop, step, dumped))
        if self.options.get("enable_dump_debug") and checked:
            control.append(self._overflow_if(make, geop, step, checked))
        new = body.to_function(bview, body.results)
        new.signature.is_stateful = True
        for name in control:
            new.signature.control_output.append(name)
            new.control_ret[name] = name
        for index, existing in enumerate(self.view.graph_def.library.function):
            if existing.signature.name == fname:
                self.view.graph_def.library.function[index].CopyFrom(new)
        self.functions[fname] = new
        self.view.set_op(geop, "StatefulPartitionedCall")
        call.attr[DUMP_ATTR].s = self.folder.encode("utf-8")

    def _targets(self, bview, geop):
        dumped, checked = [], []
        for name in topological_order(bview):
            node = bview.node(name)
            if node.op in _SKIPPED_OPS or _is_inserted_cast(node):
                continue
            try:
                outputs = output_ports(node, self.functions)
                inputs = input_ports(node, self.functions)
            except UnsupportedGraphError:
                continue
            npu_in, npu_out = self.npu_dtypes.get(name, ((), ()))
            order = self.order
            self.order += 1
            info = {"op": name, "type": node.op, "order": order, "geop": geop,
                    "fusion": fusion_rules(node), "fused_from": [n for n, _ in fused_from(node)]}
            ranks = _output_ranks(node)
            if self.mode in ("output", "all"):
                for slot, port in enumerate(outputs):
                    if port.dtype in DUMPABLE and not port.is_ref:
                        npu = npu_out[slot] if slot < len(npu_out) else port.dtype
                        ref = name if slot == 0 else f"{name}:{slot}"
                        dumped.append((ref, port.dtype, npu, ranks.get(slot), dict(info, io="output", slot=slot)))
            if self.mode in ("input", "all"):
                data = [text for text in node.input if not text.startswith("^")]
                for slot, (text, port) in enumerate(zip(data, inputs)):
                    if port.dtype in DUMPABLE and not port.is_ref:
                        npu = npu_in[slot] if slot < len(npu_in) else port.dtype
                        ref = parse_input(text)
                        dumped.append((text, port.dtype, npu, _output_ranks(bview.node(ref.node)).get(ref.port)
                                       if ref.node in bview else None, dict(info, io="input", slot=slot)))
            kind = overflow_kind(node)
            if self.debug_mode != "all" and kind != self.debug_mode:
                continue
            data = [text for text in node.input if not text.startswith("^")]
            sources = [(text, port.dtype, npu_in[slot] if slot < len(npu_in) else port.dtype)
                       for slot, (text, port) in enumerate(zip(data, inputs))
                       if port.dtype in _FLOAT and not port.is_ref]
            for slot, port in enumerate(outputs):
                if port.dtype in _FLOAT and not port.is_ref:
                    npu = npu_out[slot] if slot < len(npu_out) else port.dtype
                    ref = name if slot == 0 else f"{name}:{slot}"
                    checked.append((ref, port.dtype, npu, sources,
                                    {"op": name, "type": node.op, "order": order, "slot": slot, "kind": kind,
                                     "dtype": dtype_name(npu), "fusion": info["fusion"]}))
        return dumped, checked

    def _counter(self, make, geop) -> tuple[str, str]:
        int64 = types_pb2.DT_INT64
        table = make.add("MutableHashTableV2", name="step_counter", key_dtype=type_attr(int64),
                         value_dtype=type_attr(int64), use_node_name_sharing=False,
                         shared_name=f"npu_sim_dump_step/{layout.run_stamp()}/{self.ctx.report.graph_id}/{geop}")
        key = make.const(0, int64, "key")
        current = make.add("LookupTableFindV2", [table, key, key], name="step_read", Tin=type_attr(int64),
                           Tout=type_attr(int64))
        following = make.add("AddV2", [current, make.const(1, int64, "one")], name="next_step", T=type_attr(int64))
        insert = make.add("LookupTableInsertV2", [table, key, following], name="step_update",
                          Tin=type_attr(int64), Tout=type_attr(int64))
        step = make.add("Identity", [current, "^" + insert], name="step", T=type_attr(int64))
        return step, insert

    def _dump_if(self, make, geop, step, dumped) -> str:
        int64 = types_pb2.DT_INT64
        if self.steps:
            low = make.const([lo for lo, _ in self.steps], int64, "first_steps")
            high = make.const([hi for _, hi in self.steps], int64, "last_steps")
            inside = make.add("LogicalAnd", [make.add("GreaterEqual", [step, low], T=type_attr(int64)),
                                             make.add("LessEqual", [step, high], T=type_attr(int64))])
            pred = make.add("Any", [inside, make.const(0, types_pb2.DT_INT32, "axis")], name="dump_this_step",
                            keep_dims=False, Tidx=type_attr(types_pb2.DT_INT32))
        else:
            pred = make.const(True, types_pb2.DT_BOOL, "every_step")
        folder = os.path.join(self.folder, layout.DUMP_DIR)

        def write(branch, args):
            writes = []
            for arg, (_, graph_dtype, npu, rank, info) in zip(args[1:], dumped):
                value, dtype = as_npu_value(branch, arg, graph_dtype, npu)
                file_name = layout.stem(info["order"], info["io"], info["slot"]) + ".npy"
                writes.append(write_npy(branch, value, dtype, rank, folder, args[0], file_name))
                self.tensors.append(dict(info, file=file_name, dtype=dtype_name(npu),
                                         graph_dtype=dtype_name(graph_dtype), stored_dtype=dtype_name(dtype)))
            return writes

        return self._if(make, f"{geop}_dump", pred, step, [(ref, dtype) for ref, dtype, *_ in dumped], write)

    def _overflow_if(self, make, geop, step, checked) -> str:
        flags, finite_cache = [], {}

        def all_finite(ref, graph_dtype, npu):
            if ref not in finite_cache:
                value, dtype = as_npu_value(make, ref, graph_dtype, npu)
                finite = make.add("IsFinite", [value], T=type_attr(dtype))
                flat = make.add("Reshape", [finite, make.const([-1], types_pb2.DT_INT32, "flat")], T=type_attr(
                    types_pb2.DT_BOOL), Tshape=type_attr(types_pb2.DT_INT32))
                finite_cache[ref] = make.add("All", [flat, make.const(0, types_pb2.DT_INT32, "axis")],
                                             keep_dims=False, Tidx=type_attr(types_pb2.DT_INT32))
            return finite_cache[ref]

        for ref, graph_dtype, npu, sources, info in checked:
            flag = make.add("LogicalNot", [all_finite(ref, graph_dtype, npu)], name="overflowed")
            for text, source_dtype, source_npu in sources:  # overflowed here: its inputs were finite
                flag = make.add("LogicalAnd", [flag, all_finite(text, source_dtype, source_npu)], name="overflowed")
            flags.append(flag)
            self.overflow.setdefault(geop, []).append(info)
        packed = make.add("Pack", flags, name="overflow_flags", N=len(flags), T=type_attr(types_pb2.DT_BOOL), axis=0)
        pred = make.add("Any", [packed, make.const(0, types_pb2.DT_INT32, "axis")], name="any_overflow",
                        keep_dims=False, Tidx=type_attr(types_pb2.DT_INT32))
        folder = os.path.join(self.folder, layout.OVERFLOW_DIR)

        def write(branch, args):
            return [write_npy(branch, args[1], types_pb2.DT_BOOL, 1, folder, args[0], f"{geop}.npy")]

        return self._if(make, f"{geop}_overflow", pred, step, [(packed, types_pb2.DT_BOOL)], write)

    def _if(self, make, label, pred, step, tensors, build) -> str:
        types = [types_pb2.DT_INT64] + [dtype for _, dtype in tensors]
        then_name = self._free_function(f"npu_sim_dump_{label}")
        else_name = self._free_function(f"npu_sim_dump_{label}_skip")
        self._add_function(_branch(then_name, types, self.functions, self.marks, build))
        self._add_function(_branch(else_name, types, self.functions, self.marks, None))
        then_attr = attr_value_pb2.AttrValue()
        then_attr.func.name = then_name
        else_attr = attr_value_pb2.AttrValue()
        else_attr.func.name = else_name
        return make.add("If", [pred, step] + [ref for ref, _ in tensors], name=f"{label}_if",
                        Tcond=type_attr(types_pb2.DT_BOOL), Tin=type_list(types), Tout=type_list([]),
                        then_branch=then_attr, else_branch=else_attr)

    def _free_function(self, base: str) -> str:
        name, suffix = base, 1
        while name in self.functions:
            name = f"{base}_{suffix}"
            suffix += 1
        self.functions[name] = function_pb2.FunctionDef()  # reserved until added
        return name

    def _add_function(self, fdef) -> None:
        self.functions[fdef.signature.name] = fdef
        self.view.graph_def.library.function.add().CopyFrom(fdef)

    # ------------------------------------------------------------------ manifest
    def manifest(self) -> dict:
        report = self.ctx.report
        source = [(d.name, d.op) for d in list(report.nodes.values())[:report.nodes_before]]
        digest = hashlib.sha256("\n".join(f"{n}\t{o}" for n, o in sorted(source)).encode()).hexdigest()[:16]
        options = {key: self.options.get(key) for key in (
            "enable_dump", "dump_mode", "dump_step", "enable_dump_debug", "dump_debug_mode", "precision_mode",
            "precision_mode_v2", "fusion_switch_file", "sim_fp16_execution")}
        return {
            "format": layout.FORMAT, "graph_id": report.graph_id, "item": report.item_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(), "options": options,
            "source_graph": {"fingerprint": digest, "nodes": dict(source)},
            "tensors": sorted(self.tensors, key=lambda t: (t["order"], t["io"] == "output", t["slot"])),
            "overflow": self.overflow,
        }


def overflow_kind(node) -> str:
    """'atomic_overflow' for ops whose output the NPU accumulates with Atomic Add, else 'aicore_overflow'."""
    return ATOMIC_OVERFLOW if node.op in ATOMIC_ADD_OPS else AICORE_OVERFLOW


def _is_inserted_cast(node) -> bool:
    from npu_sim_bridge.passes.precision.marks import is_inserted_conversion

    return is_inserted_conversion(node)


def _output_ranks(node) -> dict[int, int | None]:
    if "_output_shapes" not in node.attr:
        return {}
    ranks = {}
    for slot, shape in enumerate(node.attr["_output_shapes"].list.shape):
        ranks[slot] = None if shape.unknown_rank else len(shape.dim)
    return ranks


def _branch(name, types, functions, marks, build) -> function_pb2.FunctionDef:
    """An If branch taking (step, tensors...): `build(maker, arg names)` adds the writes (None: does nothing)."""
    from npu_sim_bridge.passes.precision.functions import FunctionBody

    skeleton = function_pb2.FunctionDef()
    skeleton.signature.name = name
    args = []
    for index, dtype in enumerate(types):
        arg = "step" if index == 0 else f"tensor_{index - 1}"
        skeleton.signature.input_arg.add(name=arg, type=dtype)
        args.append(arg)
    if build is None:
        return skeleton
    body = FunctionBody(skeleton, functions)
    bview = GraphView(body.graph_def)
    writes = build(NodeMaker(bview, "write", "", marks), args)
    fdef = body.to_function(bview, {})
    fdef.signature.is_stateful = True
    for write in writes:
        fdef.signature.control_output.append(write)
        fdef.control_ret[write] = write
    return fdef
