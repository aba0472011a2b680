"""Typed results one pass hands to the passes after it (published on the PassContext by type)."""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npu_sim_bridge.graph.view import EditJournal
    from npu_sim_bridge.passes.partition.cluster import Proposal

HOST = "host"
DEVICE = "device"


@dataclasses.dataclass
class Placement:
    """Host or device for every node placement saw (precision and partition read it): `seen` holds
    them all, `host` those on the host; the others are on the device. Placement's own publication
    reads both from its proposal (a dict of every node's side was a tenth of BERT's peak)."""

    seen: Container[str]
    host: Container[str]

    @classmethod
    def of(cls, where: Mapping[str, str]) -> "Placement":
        """From {node: HOST or DEVICE}."""
        return cls(where, {name for name, side in where.items() if side == HOST})

    def host_nodes(self) -> Container[str]:
        return self.host

    def get(self, name: str) -> str | None:
        """HOST, DEVICE, or None for a node placement did not see."""
        if name not in self.seen:
            return None
        return HOST if name in self.host else DEVICE


@dataclasses.dataclass
class Proposed:
    """What placement proposed, for partition to reuse while the graph is unchanged, or to carry over
    the nodes the passes in between add (`journal` records what they do)."""

    journal: EditJournal
    proposal: Proposal
    inherent: set[str]        # host nodes the adapter never sinks (no "enable mix_compile_mode" advice)


class NpuPortDtypes(Mapping):
    """{node: (dtype per data input, dtype per output)} as the NPU holds them, for the nodes the precision
    pass decided (from its plans).

    Read by the dump pass, only when dumps are asked for: each node's entry is worked out on first read.
    """

    def __init__(self, plans):
        self._plans = plans
        self._known: dict = {}

    def __getitem__(self, name):
        found = self._known.get(name)
        if found is None:
            plan = self._plans[name]
            found = self._known[name] = (tuple(_on_npu(plan, p, False) for p in plan.sig.inputs),
                                         tuple(_on_npu(plan, p, True) for p in plan.sig.outputs))
        return found

    def __iter__(self):
        return iter(self._plans)

    def __len__(self):
        return len(self._plans)


def _on_npu(plan, port, is_output):
    if not (port.is_float and port.type_attr is not None and port.type_attr in plan.attrs):
        return port.dtype
    if is_output and plan.cube_split:
        return port.dtype
    dtype = plan.npu_of_port(port.list_index) if port.list_index is not None else plan.npu
    return dtype if dtype is not None else port.dtype
