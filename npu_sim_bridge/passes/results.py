"""Typed results one pass hands to the passes after it (published on the PassContext by type), and what the
whole pipeline returns (PipelineResult: everything the publishing step at the boundary writes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING

from tensorflow.core.framework import graph_pb2

if TYPE_CHECKING:
    from npu_sim_bridge.report.model import Report

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


@dataclasses.dataclass(frozen=True)
class FileToWrite:
    """A file a pass leaves to the publishing step (the pipeline writes nothing): the dump pass's manifest."""

    path: str
    text: str
    what: str  # what the file is, for an error message ("dump manifest")


@dataclasses.dataclass
class PipelineResult:
    """The rewritten graph and its report, plus what only the publishing step reads (report/publish.py): the
    graph as it came and the DUMP_GE_GRAPH stages kept on the way. The pipeline itself writes nothing."""

    graph_def: graph_pb2.GraphDef
    report: Report
    # The input graph: the caller's GraphDef (the pipeline worked on a copy), or its serialized bytes
    # (the pipeline edited the parsed graph in place); read with graph_as_it_came().
    source_graph: graph_pb2.GraphDef | None = None
    source_bytes: bytes | None = None
    # (stage name, serialized GraphDef) for each DUMP_GE_GRAPH stage asked for, in the order they came.
    stages: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)
    # The files the passes left to write (PassContext.leave_file), in the order they came.
    files: list[FileToWrite] = dataclasses.field(default_factory=list)

    def __iter__(self):
        # Allows `graph_def, report = rewrite(...)`.
        return iter((self.graph_def, self.report))

    def graph_as_it_came(self) -> graph_pb2.GraphDef:
        if self.source_graph is not None:
            return self.source_graph
        if self.source_bytes is not None:
            return graph_pb2.GraphDef.FromString(self.source_bytes)
        return self.graph_def  # a result that changed nothing (a GeOp body only stamped)
