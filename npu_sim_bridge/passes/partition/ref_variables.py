"""TF1 reference variables inside GeOps: each segment gets its own copy of the variable op.

A function cannot take a ref tensor as an argument, so an update such as ApplyMomentum or
AssignSub on a `VariableV2` could not sink, and with it the `tf.control_dependencies(UPDATE_OPS)`
that TF1 scripts put before the train op would cut every training graph in two. A variable op
finds its variable in the device's resource manager by container and shared name (its node name
when the shared name is empty), so a copy of the op with the shared name set reaches the very
variable the host op holds: the one the initializer and the Saver use. The copy goes into the
segment and the segment's ref inputs read it; the host op stays for everything outside.
"""

from __future__ import annotations

from tensorflow.core.framework import node_def_pb2

from npu_sim_bridge.graph.names import TensorRef, parse_input
from npu_sim_bridge.graph.op_categories import REF_VARIABLE_OPS
from npu_sim_bridge.graph.view import GraphView



def is_ref_variable(view: GraphView, name: str) -> bool:
    return name in view and view.op(name) in REF_VARIABLE_OPS  # the index's op: no NodeDef read


def mirror_ref_variables(view: GraphView, segments: list[list[str]]) -> int:
    """Give each segment a copy of every ref variable op it reads; returns the copies made."""
    if view.never_had_ops(REF_VARIABLE_OPS):  # resource variables only (TF2, Keras): nothing to mirror
        return 0
    made = 0
    for members in segments:
        inside = set(members)
        copies: dict[str, str] = {}
        for name in list(members):
            for index, text in enumerate(view.input_texts(name)):  # a tuple: set_input makes a new one
                if text.startswith("^"):
                    continue
                ref = parse_input(text)
                if ref.node in inside or not is_ref_variable(view, ref.node):
                    continue
                if ref.node not in copies:
                    copies[ref.node] = _copy(view, view.node(ref.node))
                    members.append(copies[ref.node])
                    inside.add(copies[ref.node])
                    made += 1
                view.set_input(name, index, TensorRef(copies[ref.node], ref.port))
    return made


def _copy(view: GraphView, variable: node_def_pb2.NodeDef) -> str:
    copy = node_def_pb2.NodeDef()
    copy.CopyFrom(variable)
    copy.name = view.unique_name(f"{variable.name}/NpuSimRef")
    if not copy.attr["shared_name"].s:
        copy.attr["shared_name"].s = variable.name.encode()
    for key in [key for key in copy.attr if key.startswith("_")]:
        if key == "_class":  # colocation with the host op would pull the GeOp onto its device group
            del copy.attr[key]
    view.add_node(copy)
    return copy.name
