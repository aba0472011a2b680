"""Parsing and formatting of GraphDef input strings ("node", "node:1", "^node") and device strings."""

from __future__ import annotations

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


_new_ref = tuple.__new__  # TensorRef(...) without the Python-level __new__ namedtuple defines


def parse_input(text: str) -> TensorRef:
    """Parse a GraphDef input string; "x" and "x:0" are the same tensor.

    Nothing is cached: a cache held a TensorRef and a dict entry for every input string a rewrite
    read, a tenth of its peak memory on BERT and a quarter on graphs that gain many Casts, and a rewrite
    parses each string only a few times. Where only the node counts, `node_name` is faster."""
    if ":" not in text and text[:1] != "^":
        return _new_ref(TensorRef, (text, 0))
    if text.startswith("^"):
        return _new_ref(TensorRef, (text[1:], CONTROL_PORT))
    name, _, port = text.rpartition(":")
    return _new_ref(TensorRef, (name, int(port)) if port.isdigit() else (text, 0))


def format_input(ref: TensorRef) -> str:
    """The canonical GraphDef spelling: "^x" for control, "x" for port 0, else "x:N"."""
    if ref.port == CONTROL_PORT:
        return "^" + ref.node
    if ref.port == 0:
        return ref.node
    return f"{ref.node}:{ref.port}"


def node_name(text: str) -> str:
    """The node part of a tensor or input name ("^a", "a:1" -> "a"): a plain name is returned as it
    is, with no TensorRef made (the passes ask this for every edge)."""
    if ":" not in text:
        return text[1:] if text[:1] == "^" else text
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


def on_cpu(device: str) -> bool:
    """Whether a NodeDef device string places the node on a CPU (its device part is CPU); an empty
    string (a graph nobody placed, as an offline rewrite's) does not."""
    if not device:
        return False
    tail = device.rpartition("device:")[2] if "device:" in device else device.rpartition("/")[2]
    return tail.split(":", 1)[0].upper() == "CPU"
