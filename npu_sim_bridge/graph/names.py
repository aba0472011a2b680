"""Parsing and formatting of GraphDef input strings ("node", "node:1", "^node") and device strings."""

from __future__ import annotations

import functools
from typing import NamedTuple

CONTROL_PORT = -1


class TensorRef(NamedTuple):
    """One input of a node: a producer node and its output port (-1 for a control edge)."""

    node: str
    port: int

    @property
    def is_control(self) -> bool:
        return self.port == CONTROL_PORT

    def __str__(self) -> str:
        return format_input(self)


def is_control_input(text: str) -> bool:
    return text.startswith("^")


@functools.lru_cache(maxsize=None)
def parse_input(text: str) -> TensorRef:
    """Parse a GraphDef input string; "x" and "x:0" are the same tensor.

    Cached, as names repeat (ResNet-50: 91,797 input strings, 9,032 distinct). The cache has no bound:
    a bounded one keeps a link object per entry, 60% more memory (a tenth of a rewrite's peak on
    large graphs), and the pipeline clears it when each rewrite ends (passes/pipeline.py)."""
    if text.startswith("^"):
        return TensorRef(text[1:], CONTROL_PORT)
    name, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return TensorRef(name, int(port))
    return TensorRef(text, 0)


def format_input(ref: TensorRef) -> str:
    """The canonical GraphDef spelling: "^x" for control, "x" for port 0, else "x:N"."""
    if ref.port == CONTROL_PORT:
        return "^" + ref.node
    if ref.port == 0:
        return ref.node
    return f"{ref.node}:{ref.port}"


def node_name(text: str) -> str:
    """The node part of a tensor or input name ("^a", "a:1" -> "a")."""
    return parse_input(text).node


def on_gpu(device: str) -> bool:
    """Whether a NodeDef device string places the node on a GPU: its device part, the one after
    "device:" ("/job:localhost/replica:0/task:0/device:GPU:0") or the last one ("/gpu:0"), is GPU
    (or XLA_GPU); a job named "gpu..." does not count."""
    if not device:
        return False
    tail = device.rpartition("device:")[2] if "device:" in device else device.rpartition("/")[2]
    kind = tail.split(":", 1)[0].upper()
    return kind == "GPU" or kind.endswith("_GPU")
