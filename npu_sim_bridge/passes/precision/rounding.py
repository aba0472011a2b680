"""The emulation's float16 rounding kernel (NpuSimRoundToFloat16): when a rewrite uses it, and its gradient.

The kernel itself is in native/npu_ops.cc; casts.py emits it in place of a Cast round trip.
"""

from __future__ import annotations

from tensorflow.python.framework import ops

from npu_sim_bridge.errors import NativeBuildError
from npu_sim_bridge.graph.names import on_gpu
from npu_sim_bridge.native.loader import load_npu_ops
from npu_sim_bridge.passes.precision.plan import FP16
from npu_sim_bridge.passes.precision.marks import ROUND_OP


def uses_kernel(ctx, mode) -> bool:
    """Whether this rewrite emits each float16 round trip as one NpuSimRoundToFloat16 kernel.

    sim_fp16_rounding: kernel, cast (two Casts), or auto (the default): the kernel where the graph runs
    in this process (a Session's Grappler run, which loads the op library) on CPUs, Casts in offline
    rewrites, whose GraphDef may be run by a TensorFlow without the simulator's op library, and in
    graphs placed on a GPU (the kernel has no GPU implementation). bfloat16 has no kernel.
    """
    if not mode.emulate or mode.low != FP16:
        return False
    choice = ctx.options.get("sim_fp16_rounding") or "auto"
    if choice == "cast" or (choice == "auto" and ctx.item.id == "offline"):
        return False
    if choice == "auto" and _placed_on_gpu(ctx.view):
        ctx.report.warn("sim_fp16_rounding auto: float16 round trips are Cast pairs (the same values), as "
                        "the graph is placed on a GPU and the rounding kernel NpuSimRoundToFloat16 runs on "
                        "CPUs only (each round trip would copy the tensor to the host and back)")
        return False
    try:
        load_npu_ops()
    except NativeBuildError as err:
        if choice == "kernel":
            raise
        ctx.report.warn(f"sim_fp16_rounding auto: float16 round trips are Cast pairs (the same values, "
                        f"slower) because the rounding kernel could not be loaded: {err}")
        return False
    return True


def _placed_on_gpu(view) -> bool:
    """Whether any node of the graph is placed on a GPU (Grappler hands a Session's graph placed)."""
    return any(on_gpu(device) for device in {node.device for node in view.nodes()})  # a call per device, not per node


@ops.RegisterGradient(ROUND_OP)
def _round_gradient(op, grad):
    """As for the two Casts it stands for: the gradient goes back through the same float16 rounding."""
    return [load_npu_ops().npu_sim_round_to_float16(grad)]
