"""Orders the candidate nodes most suspect first, from the dumps of the float32 and the mixed run.

The mixed run records float16 overflow (enable_dump_debug); both runs dump every device op's outputs
at step 0 (enable_dump). Ops whose float16 output overflowed come first, in graph order (the first to
overflow first), then the ops the compare finds divergent (beyond rtol), first divergent first, then
the rest in graph order. A node of a fused op brings the op's other nodes right after it.
"""

from __future__ import annotations

import dataclasses
import os

from npu_sim_bridge.errors import NpuSimError


@dataclasses.dataclass
class Guidance:
    overflow: list[str] = dataclasses.field(default_factory=list)     # ops whose float16 output overflowed
    divergent: list[str] = dataclasses.field(default_factory=list)    # ops beyond rtol, first divergent first
    note: str = ""                                                     # why there is no guidance, if so

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def dump_overrides(folder: str, overflow: bool) -> dict:
    """The options that make a run dump its device ops' outputs at step 0 (and record overflow)."""
    os.makedirs(folder, exist_ok=True)
    options = {"enable_dump": True, "dump_path": folder, "dump_step": "0", "dump_mode": "output"}
    if overflow:
        options.update(enable_dump_debug=True, dump_debug_mode="all")
    return options


def read_guidance(reference_dump: str, mixed_dump: str, rtol: float) -> Guidance:
    """What the two dumps say; a dump that cannot be read gives a Guidance with the note why."""
    from npu_sim_bridge.dumps import compare_dumps, read_overflow

    found = Guidance()
    try:
        for record in read_overflow(mixed_dump):
            for entry in record["ops"]:
                if entry["op"] not in found.overflow:
                    found.overflow.append(entry["op"])
        result = compare_dumps(reference_dump, mixed_dump, rtol=rtol)
        rows = sorted((row for row in result.rows if row.status == "diverged"),
                      key=lambda row: (row.step, row.order if row.order is not None else 1 << 60))
        for row in rows:
            if row.op not in found.divergent:
                found.divergent.append(row.op)
    except NpuSimError as err:
        found.note = f"the dumps gave no guidance ({err}); candidates are tried in graph order"
    return found


def order_nodes(candidates: list, guidance: Guidance | None) -> list:
    """Candidate NodeInfos, most suspect first (see the module docstring)."""
    by_name = {node.name: node for node in candidates}
    ordered: list[str] = []

    def take(name):
        if name in by_name and name not in ordered:
            ordered.append(name)
            for other in by_name[name].fused_with:
                take(other)

    if guidance is not None:
        for name in guidance.overflow + guidance.divergent:
            take(name)
    for node in candidates:
        take(node.name)
    return [by_name[name] for name in ordered]
