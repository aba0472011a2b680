"""How a GeOp's call runs its body: the call's op, its `config_proto` and the FunctionDef's attributes.

The call's op (sim_geop_call). A PartitionedCall runs its body as a multi-device function: at its
first run TensorFlow turns the body into a graph, places it, partitions it by device, turns each part
back into a function and instantiates that; Grappler's function optimizer and XLA's encapsulation
pass build every call's body once more before that. On ResNet-50 that was most of what the simulated
first step cost over the plain one. A GeOp's body is one segment of one device, so in a Session on
CPUs the call is an NpuSimGeOp (native/geop.cc): one single-device function on the call's device,
with the post-partitioning passes TensorFlow runs on a function's parts (oneDNN's rewrite), so the
body runs the same kernels and every bit stays the same. A body that calls functions TensorFlow must
lower (If, While, a plain nested call), a graph placed on a GPU (the kernel runs on CPUs) and an
offline rewrite (its GraphDef may run where the simulator's op library is not loaded) keep the
PartitionedCall. A call XLA compiles whole (`_XlaMustCompile`, as Keras's grouped convolutions in
ConvNeXt and RegNet) is no such call: the kernel's function runtime hands it to XLA's launch kernel,
which compiles the same function a PartitionedCall's XLA passes would, to the same bits.

A GeOp body's nodes went through a whole Grappler iteration inside the graph that held them, before
the rewrite; the rewrite adds its Casts and roundings, one per tensor. Grappler has nothing left to do
there that changes a result: the Session's meta optimizer would run every optimizer over each body,
once per meta-optimizer iteration (on ResNet-50 twelve seconds of a first step), and the five that
changed anything (pruning, CSE, constant folding, arithmetic and dependency optimization, run once
at the call before) changed no loss bit on ten sweep models, ResNet-50 and EfficientNetB0 among
them, and their run took about a second of those two models' first step.

So every body is marked for the Session's meta optimizer to leave it to its caller, and its call runs
no Grappler: the body runs as the rewrite wrote it. (On RegNetX002, whose body calls 26 jit-compiled
functions, the Session's pass over it took 4.5 s of the first step.) A body that still holds an If, a
While or a plain call (an offline rewrite of a graph with control flow v2: a Session lowers those before
its Grappler run, so its bodies hold none) needs no Grappler pass either: a PartitionedCall's
instantiation lowers them and inlines the calls (the function runtime's pre-placement passes; a
body's While runs as Enter, Merge, Switch and Exit), and the meta optimizer, which carries the mark on
to the functions the body calls, leaves those to the call too. On the Keras ResNet-50 as built, whose
body holds batch norm's 159 Ifs, that is the body's 4,137 nodes and the 318 branch functions' 4,452
that Grappler no longer turns into function items and back after the rewrite.
"""

from __future__ import annotations

from typing import Iterable

from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.protobuf import config_pb2

from npu_sim_bridge.errors import NativeBuildError
from npu_sim_bridge.graph.attr_names import XLA_MUST_COMPILE_ATTR
from npu_sim_bridge.graph.names import on_gpu
from npu_sim_bridge.graph.op_categories import GEOP_KERNEL_OP
from npu_sim_bridge.graph.ports import called_by
from npu_sim_bridge.native.loader import load_geop_kernel

# Grappler's meta optimizer leaves library functions with this attribute to the callers that
# instantiate them (tensorflow/core/framework/dataset.h kTFDataFunction).
LEFT_TO_CALLER_ATTR = "_tf_data_function"


def _no_grappler() -> bytes:
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config.SerializeToString()


NO_GRAPPLER = _no_grappler()  # every GeOp call's config_proto: the body runs as it is


def needs_lowering(nodes: Iterable, functions: dict[str, function_pb2.FunctionDef]) -> bool:
    """Whether any of `nodes` (a body's NodeDefs) calls a function TensorFlow must lower or place: an If,
    a While, a plain call. A call marked `_XlaMustCompile` does not count: XLA compiles it whole, under a
    PartitionedCall as under the GeOp kernel (Keras's grouped convolutions are such calls)."""
    for node in nodes:
        if called_by(node, functions):  # called_by reads only an op's func attrs
            marked = node.attr.get(XLA_MUST_COMPILE_ATTR)
            if marked is None or not marked.b:
                return True
    return False


def geop_attrs() -> tuple[dict[str, attr_value_pb2.AttrValue], dict[str, attr_value_pb2.AttrValue]]:
    """(the call's extra attributes, the FunctionDef's attributes) of every GeOp: no Grappler at the call, and
    the Session's meta optimizer leaves the body to the call."""
    call = {"config_proto": attr_value_pb2.AttrValue(s=NO_GRAPPLER)}
    return call, {LEFT_TO_CALLER_ATTR: attr_value_pb2.AttrValue(b=True)}


class KernelCalls:
    """Which GeOps of one rewrite are NpuSimGeOps (sim_geop_call: kernel, partitioned_call, or auto,
    the default); the kernel library loads at the first one."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.choice = ctx.options.get("sim_geop_call") or "auto"
        self.loaded = False
        if self.choice == "auto" and ctx.item.id == "offline":
            self.choice = "partitioned_call"

    def wanted(self, lowered: bool, device: str) -> bool:
        """Whether the GeOp of a body that `needs_lowering` or not, called on `device`, is an NpuSimGeOp."""
        if self.choice == "partitioned_call" or on_gpu(device) or (lowered and self.choice == "auto"):
            return False
        if not self.loaded:
            try:
                load_geop_kernel()
            except NativeBuildError as err:
                if self.choice == "kernel":
                    raise
                self.ctx.report.warn(f"sim_geop_call auto: GeOps run as PartitionedCalls (the same values, a "
                                     f"slower first step) because the GeOp kernel could not be loaded: {err}")
                self.choice = "partitioned_call"
                return False
            self.loaded = True
        return True


def as_kernel_call(view, name: str) -> None:
    """Turn the GeOp's PartitionedCall `name` in `view` into its NpuSimGeOp (the same inputs, outputs, Tin,
    Tout and f)."""
    view.set_op(name, GEOP_KERNEL_OP)
    call = view.node(name)
    for key in ("config", "config_proto", "executor_type"):  # PartitionedCall's, not the kernel's
        if key in call.attr:
            del call.attr[key]
