"""The TensorBoard copy of a rewritten graph: GeOp bodies inlined under their GeOp's scope, with device and segment.

TensorBoard draws a function call as one opaque node and colours by the `device` field. The copy it
gets puts each GeOp's body nodes under the scope `<GeOp>/` (TensorBoard draws the GeOp as a box that
opens), sets their device to the simulated NPU and every other node's to the host CPU ("Color:
Device" then tells host from device), and gives every node the attribute `_npu_sim_segment` (the
GeOp, or "host"), which TensorBoard's node card shows. The copy is for looking at, not for running.
"""

from __future__ import annotations

from tensorflow.core.framework import graph_pb2

from npu_sim_bridge.graph.attr_names import GEOP_ATTR, SEGMENT_ATTR
from npu_sim_bridge.graph.inline import graph_input

NPU_DEVICE = "/job:localhost/replica:0/task:0/device:NPU:0"
HOST_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


def tensorboard_graph(graph_def: graph_pb2.GraphDef, hidden_scope: str = "") -> graph_pb2.GraphDef:
    """`graph_def` with every GeOp call replaced by its body under `<GeOp>/`, devices and segments set."""
    library = {function.signature.name: function for function in graph_def.library.function}
    bodies = {node.name: library.get(node.attr["f"].func.name) for node in graph_def.node
              if GEOP_ATTR in node.attr and "f" in node.attr}
    bodies = {name: body for name, body in bodies.items() if body is not None}
    results = {}  # (GeOp, output index) -> graph input naming the body node that gives it
    for name, body in bodies.items():
        members = {member.name: member for member in body.node_def}
        for index, arg in enumerate(body.signature.output_arg):
            results[(name, index)] = graph_input(body.ret[arg.name], members, library, prefix=name + "/")

    def outside(text: str) -> str:
        control = "^" if text.startswith("^") else ""
        name, _, port = text.lstrip("^").partition(":")
        if name not in bodies:
            return text
        found = results.get((name, int(port) if port.isdigit() else 0))
        if found is None:
            return text
        return control + found.lstrip("^") if control else found

    copy = graph_pb2.GraphDef()
    copy.versions.CopyFrom(graph_def.versions)
    for node in graph_def.node:
        body = bodies.get(node.name)
        if body is None:
            added = copy.node.add()
            added.CopyFrom(node)
            del added.input[:]
            added.input.extend(outside(text) for text in node.input)
            added.device = HOST_DEVICE
            added.attr[SEGMENT_ATTR].s = b"host"
            continue
        members = {member.name: member for member in body.node_def}
        arguments = {arg.name: index for index, arg in enumerate(body.signature.input_arg)}
        call_inputs = [text for text in node.input if not text.startswith("^")]
        for member in body.node_def:
            if hidden_scope and member.name.startswith(hidden_scope):
                continue
            added = copy.node.add()
            added.CopyFrom(member)
            added.name = f"{node.name}/{member.name}"
            del added.input[:]
            for text in member.input:
                inner = graph_input(text, members, library, prefix=node.name + "/")
                if inner is not None:
                    added.input.append(inner)
                    continue
                argument = arguments.get(text.lstrip("^").split(":")[0])
                if argument is not None and argument < len(call_inputs):
                    added.input.append(outside(call_inputs[argument]))
            added.device = NPU_DEVICE
            added.attr[SEGMENT_ATTR].s = node.name.encode("utf-8")
    kept = {name for name in library if name not in {node.attr["f"].func.name for node in graph_def.node
                                                      if node.name in bodies}}
    copy.library.function.extend(library[name] for name in sorted(kept))
    return copy
