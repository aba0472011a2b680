"""An op's time on its unit: the roofline (compute vs memory) at the unit's efficiency, plus a fixed task cost."""

from __future__ import annotations

import dataclasses
import math

from npu_sim_bridge.estimate.hardware import Hardware
from npu_sim_bridge.estimate.ops import AICPU, CUBE, FREE, HOST, Work


@dataclasses.dataclass(frozen=True)
class OpTime:
    """An op's estimated time in microseconds and what bounds it."""

    us: float
    bound: str             # compute, memory, launch, aicpu, host, free
    cores_used: int = 0    # AI Cores (Block Dim) its work fills
    convert_us: float = 0.0  # of `us`, the conversions of a float32 cube op


def op_time(work: Work, hw: Hardware, width: int = 2) -> OpTime:
    """Time of one op's work on `hw`; `width` is the bytes of its float elements (float32 halves the vector)."""
    if work.unit == FREE:
        return OpTime(0.0, "free")
    if work.unit == AICPU:
        us = hw["aicpu_task_us"] + work.flops / (hw["aicpu_gflops"] * 1e3) + work.bytes / (hw["aicpu_gbps"] * 1e3)
        return OpTime(us, "aicpu")
    if work.unit == HOST:
        return OpTime(hw["host_op_us"] + work.bytes / (hw["host_gbps"] * 1e3), "host")
    compute_us, memory_us, used = roofline_parts(work, hw, width)
    task = hw["task_overhead_us"]
    body = max(compute_us, memory_us)
    convert = conversion_us(work.convert_elements, hw) if work.fp32_cube and not hw.fp32_cube else 0.0
    us = body + task + convert
    bound = "launch" if task >= body else ("compute" if compute_us >= memory_us else "memory")
    return OpTime(us, bound, used, convert)


def roofline_parts(work: Work, hw: Hardware, width: int = 2) -> tuple:
    """(compute us, memory us, cores used) of a cube or vector op: compute at the unit's efficiency over the
    cores its pieces fill; memory at HBM bandwidth x hbm_efficiency (x vector_traffic for vector ops)."""
    memory_us = work.bytes / (hw["hbm_gbps"] * 1e3 * hw["hbm_efficiency"])
    if work.unit == CUBE:
        cores = hw["cube_cores"]
        used = int(min(cores, max(1, math.ceil(work.pieces / hw["cube_block_tiles"]))))
        rate = hw.cube_flops * hw["cube_efficiency"] * used / cores
    else:
        memory_us *= hw["vector_traffic"]
        cores = hw["vector_cores"]
        used = int(min(cores, max(1, math.ceil(work.pieces / hw["vector_block_elements"]))))
        rate = hw.vector_flops * hw["vector_efficiency"] * used / cores / (2 if width >= 4 else 1)
    compute_us = work.flops / rate * 1e6 if work.flops else 0.0
    return compute_us, memory_us, used


def conversion_us(count: float, hw: Hardware) -> float:
    """Casting `count` float32 elements to float16 or back on the vector unit: a task each way."""
    rate = hw.vector_flops * hw["vector_efficiency"] / 2
    memory = count * 6 / (hw["hbm_gbps"] * 1e3 * hw["hbm_efficiency"])
    return max(count / rate * 1e6, memory) + 2 * hw["task_overhead_us"]


def transfer_us(nbytes: float, hw: Hardware) -> float:
    """One copy over the host link."""
    return hw["transfer_us"] + nbytes / (hw["host_link_gbps"] * 1e3)
