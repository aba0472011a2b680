"""Typed results one pass hands to the passes after it (published on the PassContext by type)."""

from __future__ import annotations

import dataclasses

HOST = "host"
DEVICE = "device"


@dataclasses.dataclass
class Placement:
    """Host or device for every node of the graph (placement makes it; precision and partition read it)."""

    where: dict[str, str]

    def host_nodes(self) -> set[str]:
        return {name for name, where in self.where.items() if where == HOST}

    def get(self, name: str) -> str | None:
        return self.where.get(name)
