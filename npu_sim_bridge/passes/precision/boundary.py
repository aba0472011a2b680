"""How a tensor leaves the device: read as the NPU holds it, cast back to the dtype its reader expects.

A fetch (or a function result) reads an op's output; it does not change how the op runs. The precision
pass therefore decides a fetched node as if nothing fetched it, and this module puts the conversion at
the boundary instead:

- `leaving(rewriter, ref, dtype)` is the one rule: the tensor that carries `ref` out of the device in
  `dtype`: `ref` itself when the graph already holds it so, else the Cast (native execution: float16 back
  to float32) or the float16 round trip (emulation: the value the NPU holds) the rewrite shares with
  every other reader of that output.
- `FetchBoundary` applies it to the fetched nodes of a graph. A fetched node whose outputs would leave
  differently from what its kernel writes runs under a new name, `<name>/NpuSimOnDevice`, and the
  fetched name becomes an Identity (IdentityN for several outputs) of the tensors that leave, with the
  original dtypes: the fetch keeps its name and dtype, and reads what the NPU would hand over.
"""

from __future__ import annotations

from tensorflow.core.framework import attr_value_pb2, node_def_pb2

from npu_sim_bridge.graph.names import TensorRef
from npu_sim_bridge.passes.precision.marks import PRECISION_ATTR

DEVICE_SUFFIX = "NpuSimOnDevice"


def leaving(rewriter, ref: TensorRef, dtype: int) -> TensorRef | None:
    """The tensor carrying `ref` off the device in `dtype`, or None when `ref` itself does."""
    return rewriter.convert(ref, None, want_dtype=dtype)


class FetchBoundary:
    """The fetched nodes of one graph whose outputs leave the device through a conversion.

    `prepare` (right after the rewrite, while its Casts are still being added) works out the tensors
    that leave; `apply` (after the Casts are reported) renames the op and gives its name to the
    boundary node."""

    def __init__(self, view, rewriter):
        self.view = view
        self.rewriter = rewriter
        self._leaving: dict[str, list[tuple[TensorRef | None, int]]] = {}
        self.renamed: dict[str, str] = {}  # fetched name -> the name the op now runs under

    def prepare(self, fetched, plans) -> None:
        """`plans`: the graph's Plans, read here only (not kept: they go before the Casts are reported)."""
        for name in sorted(fetched):
            plan = plans.get(name)
            if plan is None or name not in self.view:
                continue
            outputs = plan.sig.outputs
            if not outputs or any(port.is_ref for port in outputs):
                continue
            exits = []
            for index, port in enumerate(outputs):
                new = leaving(self.rewriter, TensorRef(name, index), port.dtype) if port.is_float else None
                exits.append((new, port.dtype))
            if any(new is not None for new, _ in exits):
                self._leaving[name] = exits

    def apply(self) -> None:
        for name, exits in self._leaving.items():
            self.renamed[name] = self._split(name, exits)

    def _split(self, name: str, exits) -> str:
        view = self.view
        node = view.node(name)
        moved = node_def_pb2.NodeDef()
        moved.CopyFrom(node)
        device_name = view.unique_name(f"{name}/{DEVICE_SUFFIX}")
        moved.name = device_name
        view.add_node(moved, device_name, list(moved.input))
        for index in range(len(exits)):  # every reader of the op's outputs (the boundary Casts too)
            view.replace_uses(TensorRef(name, index), TensorRef(device_name, index))
        for position in range(len(view.input_texts(name)) - 1, -1, -1):
            view.remove_input(name, position)
        single = len(exits) == 1
        view.set_op(name, "Identity" if single else "IdentityN")
        mark = node.attr[PRECISION_ATTR].s if PRECISION_ATTR in node.attr else b""
        node.attr.clear()
        if single:
            node.attr["T"].type = exits[0][1]
        else:
            node.attr["T"].CopyFrom(attr_value_pb2.AttrValue(
                list=attr_value_pb2.AttrValue.ListValue(type=[dtype for _, dtype in exits])))
        if mark or self.rewriter.mark:
            node.attr[PRECISION_ATTR].s = mark or self.rewriter.mark.encode()
        for index, (new, _) in enumerate(exits):
            view.add_input(name, new if new is not None else TensorRef(device_name, index))
        return device_name
