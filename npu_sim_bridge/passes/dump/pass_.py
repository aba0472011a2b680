"""The "dump" pass: the ops inside each GeOp write their tensors (.npy) and float16 overflow flags at run time.

Runs last, on the GeOp bodies the partition pass made (the device ops; ops left on the host are not
dumped, as on the NPU). Into each body it adds, with TensorFlow ops only (a GeOp body cannot call
Python; instrument.py builds them):
- a run counter: a MutableHashTableV2 in the device's resource manager, read and incremented once per
  run of the GeOp. A GeOp runs once per Session.run of its graph, so the counter is the step: it starts
  at 0 in each new Session, and each graph TensorFlow builds for a fetch/feed set counts its own runs
  (as the NPU's graph engine counts iterations per graph);
- enable_dump: per dumped tensor, a write of <dump dir>/dump/step_<k>/<stem>.npy (layout.py) next to
  the tensor, at the steps dump_step names, in the dtype the NPU holds it (float16 where the op runs
  in float16, also when emulated in float32). Ops in a cond branch that did not run write nothing
  at that step; the branch's marker file is then missing too, so readers say why. In a while frame
  every turn writes its own file (<stem>.iter_<turn>.npy);
- enable_dump_debug: per float output of a checked op (the precision pass's inserted Casts and
  float16 roundings included) an "overflowed here" check: the output, in the dtype the NPU holds it,
  is not all finite while every float input of the op is (the adapter's "abnormal output from normal
  inputs"; an inf passed on from an earlier op does not flag again). Where it holds, the number of
  non-finite values goes to overflow/step_<k>/<stem>.npy. dump_debug_mode picks the ops:
  aicore_overflow every device op but the Atomic Add ones, atomic_overflow only the ops whose output
  the NPU accumulates with Atomic Add (kinds.ATOMIC_ADD_OPS), all both.
The writes are control outputs of the body, so the GeOp returns after they are done. The manifest
(op names, types, graph order, dtypes, fusion history, frames and cond branches, the input graph) is
written at rewrite time, by the publishing step (report/publish.py) once the pipeline has returned. TensorFlow's tfdbg2 dumps (DebugIdentityV2) were not used: they carry no
step number, cannot be limited to dump_step inside the graph, and sit in a writer buffer until
Python flushes it.
"""

from __future__ import annotations

import hashlib
import os
import time

from npu_sim_bridge.graph.validate import topological_order
from npu_sim_bridge.graph.attr_names import DUMP_ATTR, GEOP_ATTR, SEEN_ATTR
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.dump import layout
from npu_sim_bridge.passes.dump.instrument import Instrumenter
from npu_sim_bridge.passes.dump.kinds import ATOMIC_ADD_OPS, overflow_kind  # noqa: F401 (re-exported)
from npu_sim_bridge.passes.results import NpuPortDtypes



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

        geops = [name for name in topological_order(view) if GEOP_ATTR in view.node(name).attr]
        if not geops:
            report.warn("enable_dump/enable_dump_debug: the graph has no device segment (GeOp), so no tensor is "
                        "dumped; dumps cover the ops that run on the device (run the partition pass, the default)")
            return PassResult(changed=False, stats={"geops": 0})
        folder = os.path.join(os.path.abspath(options.get("dump_path")), layout.run_stamp(), report.graph_id)
        dump = Instrumenter(ctx, folder)
        for geop in geops:
            dump.instrument(geop)
            if dump.functions[view.node(geop).attr["f"].func.name].control_ret:
                view.node(geop).attr[DUMP_ATTR].s = folder.encode("utf-8")
        manifest = _manifest(dump)
        if not manifest["tensors"] and not manifest["overflow"]:
            return PassResult(changed=False, stats={"geops": len(geops), "tensors": 0})
        # Written by the publishing step (report/publish.py) once the pipeline returns: it writes nothing.
        ctx.leave_file(os.path.join(folder, layout.MANIFEST), layout.manifest_text(manifest), "dump manifest")
        checks = sum(len(v) for v in manifest["overflow"].values())
        report.warn(f"dumps of this graph go to {folder} ({len(manifest['tensors'])} tensors of "
                    f"{len({t['op'] for t in manifest['tensors']})} device ops"
                    + (f", overflow checks on {checks} tensors" if options.get("enable_dump_debug") else "") + ")")
        return PassResult(changed=True, stats={"geops": len(geops), "folder": folder,
                                               "tensors": len(manifest["tensors"]), "checks": checks,
                                               "branches": len(manifest["branches"])})


def _manifest(dump: Instrumenter) -> dict:
    report = dump.ctx.report
    source = [(d.name, d.op) for d in list(report.nodes.values())[:report.nodes_before]]
    digest = hashlib.sha256("\n".join(f"{n}\t{o}" for n, o in sorted(source)).encode()).hexdigest()[:16]
    options = {key: dump.options.get(key) for key in (
        "enable_dump", "dump_mode", "dump_step", "enable_dump_debug", "dump_debug_mode", "precision_mode",
        "precision_mode_v2", "fusion_switch_file", "sim_fp16_execution")}
    return {
        "format": layout.FORMAT, "graph_id": report.graph_id, "item": report.item_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(), "options": options,
        "dump_steps": [list(pair) for pair in dump.steps] or None,
        "source_graph": {"fingerprint": digest, "nodes": dict(source)},
        "tensors": sorted(dump.tensors, key=lambda t: (t["order"], t["io"] == "output", t["slot"])),
        "branches": dump.branches,
        "overflow": dump.overflow,
    }
