"""Outlining: replace a set of nodes by one call node of a new FunctionDef that holds them.

The members' edges from outside become the function's inputs (and the call's control inputs),
their tensors read outside become its outputs, and control edges out of the set leave from the
call. A member whose name must survive (fetched, preserved) is replaced by a stub of the same
name outside the call: Identity (one output), IdentityN (several) or NoOp (none, control edge).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Iterable, Mapping

from tensorflow.core.framework import attr_value_pb2, function_pb2, node_def_pb2

from npu_sim_bridge.errors import GraphValidationError, UnsupportedGraphError
from npu_sim_bridge.graph.names import CONTROL_PORT, TensorRef, format_input, parse_input
from npu_sim_bridge.graph.ports import Port, input_ports, is_stateful, output_ports
from npu_sim_bridge.graph.table import edges
from npu_sim_bridge.graph.view import GraphView

NOINLINE_ATTR = "_noinline"
NOSPECIALIZE_ATTR = "_nospecialize"
_COLOCATION_ATTR = "_class"
_ARG_NAME = re.compile(r"[^a-z0-9_]")


@dataclasses.dataclass
class OutlineResult:
    """What `outline` did: the call node, its function, the tensors it takes and gives, the stubs."""

    call: str
    function: str
    inputs: list[str]
    outputs: list[str]
    control_inputs: list[str]
    stubs: list[str]
    stateful: bool


def function_library(view: GraphView) -> dict[str, function_pb2.FunctionDef]:
    """The graph's functions by name (a snapshot; `outline` keeps a dict it is given up to date)."""
    return {func.signature.name: func for func in view.graph_def.library.function}


def outline(view: GraphView, members: Iterable[str], *, function_name: str, call_name: str,
            library: dict[str, function_pb2.FunctionDef] | None = None,
            keep_names: Iterable[str] = (), device: str | None = None,
            function_attrs: Mapping[str, attr_value_pb2.AttrValue] | None = None,
            call_attrs: Mapping[str, attr_value_pb2.AttrValue] | None = None,
            member_attrs: Mapping[str, attr_value_pb2.AttrValue] | None = None) -> OutlineResult:
    """Move `members` into FunctionDef `function_name`, called by a new node `call_name`.

    The call is a StatefulPartitionedCall when a member is stateful, else a PartitionedCall; the
    FunctionDef is marked `_noinline` and `_nospecialize` so Grappler keeps the call as it is.
    `members` are given in the order the body lists them (topological order reads best).
    `keep_names` lists members whose names must survive (they get a stub). `device` is the call's
    device (default: the members' most common one). `member_attrs` are set on every body node.
    The caller makes sure that contracting the members creates no cycle.
    """
    if library is None:
        library = function_library(view)
    # One dict for the members' order and for asking whether a name is one (a list and a set of every
    # member, and the view's own dict of them to remove, were a fifth of the rewrite's peak on BERT).
    member_order = dict.fromkeys(members)
    member_set = member_order
    missing = [name for name in member_order if name not in view]
    if missing:
        raise GraphValidationError(f"cannot outline nodes that are not in the graph: {', '.join(missing[:5])}")
    if function_name in library:
        raise GraphValidationError(f"cannot outline into function {function_name!r}: the library already has it")
    kept = set(keep_names)
    keep = [name for name in member_order if name in kept]
    outputs_of: dict[str, tuple[Port, ...]] = {}
    stateful_ops: dict[str, bool] = {}  # statefulness is the op's (or the called function's)
    stateful_members = set()
    devices: Counter = Counter()
    # One tuple per distinct list of output ports: members of an op and dtype share it (a tuple of
    # Ports per member was most of outlining's memory).
    shared_ports: dict[tuple[Port, ...], tuple[Port, ...]] = {}
    for name in member_order:  # one read of each member (the view builds a NodeDef wrapper at each)
        node = view.node(name)
        ports = output_ports(node, library)
        outputs_of[name] = shared_ports.setdefault(ports, ports)
        op = node.op
        stateful_op = stateful_ops.get(op)
        if stateful_op is None:
            stateful_op = stateful_ops[op] = is_stateful(node, library)
        if stateful_op:
            stateful_members.add(name)
        devices[node.device] += 1

    # --- what crosses the boundary ------------------------------------------------------------
    arg_of: dict[TensorRef, str] = {}
    arg_types: list[int] = []
    call_inputs: list[str] = []
    control_inputs: list[str] = []
    for name in member_order:
        node = None
        for position, text in enumerate(view.input_texts(name)):
            if text in member_set:  # most inputs: a member's port 0, spelled as its name
                continue
            ref = parse_input(text)
            if ref.node in member_set:
                continue
            if ref.port == CONTROL_PORT:
                if text not in control_inputs:
                    control_inputs.append(text)
                continue
            if ref not in arg_of:
                node = node or view.node(name)
                arg_of[ref] = f"input_{len(arg_of)}"
                arg_types.append(_edge_type(view, ref, node, position, library))
                call_inputs.append(format_input(ref))

    returned: dict[TensorRef, int] = {}
    data_edges: list[tuple[str, int, TensorRef]] = []   # (outside consumer, input index, member tensor)
    control_users: list[str] = []
    control_members: set[str] = set()    # members an outside node waits on
    consumer_index = view.consumer_index()
    # Only the users outside: a set of every member's users holds most members again (a tenth of the peak).
    outside_users = sorted({user for name in member_order for user in edges(consumer_index.get(name, ()))
                            if user not in member_set})
    for user in outside_users:
        for index, text in enumerate(view.input_texts(user)):
            ref = parse_input(text)
            if ref.node not in member_set:
                continue
            if ref.port == CONTROL_PORT:
                control_members.add(ref.node)
                if user not in control_users:
                    control_users.append(user)
            else:
                data_edges.append((user, index, ref))
    # Outputs in member order, then port order: the same members give the same signature.
    read_outside = {ref for _, _, ref in data_edges}
    producers = {ref.node for ref in read_outside}  # a rank for these only (not a dict entry per member)
    member_rank = {name: rank for rank, name in enumerate(member_order) if name in producers}
    for ref in sorted(read_outside, key=lambda ref: (member_rank[ref.node], ref.port)):
        returned[ref] = len(returned)
    for name in keep:
        for port in range(len(outputs_of[name])):
            returned.setdefault(TensorRef(name, port), len(returned))

    stateful = bool(stateful_members)
    control_rets = [name for name in member_order
                    if name in stateful_members or name in control_members
                    or (name in keep and not outputs_of[name])]

    # --- the call node ------------------------------------------------------------------------
    if device is None:
        device = devices.most_common(1)[0][0] if devices else ""
    call = node_def_pb2.NodeDef(name=call_name, op="StatefulPartitionedCall" if stateful else "PartitionedCall",
                                device=device)
    call.input.extend(call_inputs + control_inputs)
    call.attr["Tin"].list.type.extend(arg_types)
    call.attr["Tout"].list.type.extend(outputs_of[ref.node][ref.port].dtype
                                       for ref, _ in sorted(returned.items(), key=lambda item: item[1]))
    call.attr["f"].func.name = function_name
    for key in ("config", "config_proto", "executor_type"):
        call.attr[key].s = b""
    for key, value in (call_attrs or {}).items():
        call.attr[key].CopyFrom(value)
    if call_name in view:
        raise GraphValidationError(f"cannot add call node {call_name!r}: the name is taken")

    # --- the FunctionDef ----------------------------------------------------------------------
    # Built in place in the graph's library (the checks above are done: nothing fails half way).
    func = view.graph_def.library.function.add()
    func.signature.name = function_name
    func.signature.is_stateful = stateful
    taken: set[str] = set()  # the names given so far; member names are taken too
    arg_names: dict[str, str] = {}
    for ref, arg in arg_of.items():
        arg_names[arg] = _free_name(arg, taken, member_set)
    for (ref, arg), dtype in zip(arg_of.items(), arg_types):
        func.signature.input_arg.add(name=arg_names[arg], type=dtype)
    out_names = []
    for ref, index in sorted(returned.items(), key=lambda item: item[1]):
        port = outputs_of[ref.node][ref.port]
        out_name = _free_name(f"output_{index}", taken, member_set)
        out_names.append(out_name)
        func.signature.output_arg.add(name=out_name, type=port.dtype)
        func.ret[out_name] = port.function_output(ref.node)
    for name in control_rets:
        func.signature.control_output.append(name)
        func.control_ret[name] = name
    for key, value in (function_attrs or {}).items():
        func.attr[key].CopyFrom(value)
    func.attr[NOINLINE_ATTR].b = True
    func.attr[NOSPECIALIZE_ATTR].b = True

    # The member attrs go in as one serialized NodeDef merged into each body node (map entries by key).
    marks = node_def_pb2.NodeDef(attr=member_attrs or {}).SerializeToString() if member_attrs else b""
    for name in member_order:
        body = func.node_def.add()
        body.CopyFrom(view.node(name))
        del body.input[:]
        body_inputs = []
        for text in view.input_texts(name):
            if text in member_set:  # a member's port 0, spelled as its name
                body_inputs.append(outputs_of[text][0].function_output(text))
                continue
            ref = parse_input(text)
            if ref.node in member_set:
                if ref.port == CONTROL_PORT:
                    body_inputs.append(text)
                else:  # formatted at each read: a dict of them was a fifth of a rewrite's peak
                    body_inputs.append(outputs_of[ref.node][ref.port].function_output(ref.node))
            elif ref.port != CONTROL_PORT:
                body_inputs.append(arg_names[arg_of[ref]])
        body.input.extend(body_inputs)
        if _COLOCATION_ATTR in body.attr:  # few nodes have one: no call for the others
            _drop_outside_colocation(body, member_set)
        if marks:
            body.MergeFromString(marks)

    # --- the rewiring -------------------------------------------------------------------------
    # Add the call, point the outside users at it, then drop the members in one step;
    # the stubs come last because they take members' names.
    library[function_name] = func
    view.add_node(call)
    for user, index, ref in data_edges:
        view.set_input(user, index, TensorRef(call_name, returned[ref]))
    for user in control_users:
        node = view.node(user)
        for index in reversed(range(len(node.input))):
            text = node.input[index]
            if text.startswith("^") and text[1:] in member_set:
                view.remove_input(user, index)
        if not any(text == call_name or text.startswith(call_name + ":") for text in node.input):
            view.add_input(user, "^" + call_name)
    view.remove_nodes(member_order)
    if keep:
        view.compact()  # the stubs reuse member names: the removed nodes must be gone first

    stubs = []
    for name in keep:
        stubs.append(_add_stub(view, name, outputs_of[name], returned, call_name, device))
    return OutlineResult(call=call_name, function=function_name, inputs=call_inputs,
                         outputs=[format_input(ref) for ref in returned], control_inputs=control_inputs,
                         stubs=stubs, stateful=stateful)


def _edge_type(view: GraphView, ref: TensorRef, consumer, position: int, library) -> int:
    producer = view.get(ref.node)
    if producer is not None:
        try:
            return output_ports(producer, library)[ref.port].dtype
        except UnsupportedGraphError:
            pass  # an op this process does not know: the consumer's port says the type too
    data_position = sum(1 for text in consumer.input[:position] if not text.startswith("^"))
    return input_ports(consumer, library)[data_position].dtype


def _free_name(base: str, taken: set[str], members: set[str]) -> str:
    name = _ARG_NAME.sub("_", base.lower())
    candidate, suffix = name, 1
    while candidate in taken or candidate in members:
        candidate = f"{name}_{suffix}"
        suffix += 1
    taken.add(candidate)
    return candidate


def _drop_outside_colocation(node: node_def_pb2.NodeDef, members: set[str]) -> None:
    """Colocation with a node outside the function cannot be honoured inside it: drop it."""
    _keep_colocation(node, lambda name: name in members)


def forget_colocation(view: GraphView, present=None) -> int:
    """Drop `loc:@X` colocation entries that name nodes no longer in the graph; returns the count.

    Outlining moves nodes into functions; a node left outside that was colocated with one of them
    would otherwise make the GraphDef fail to import ("colocated with unknown node").
    """
    present = present if present is not None else view.__contains__
    dropped = 0
    for node in view.nodes():
        if _COLOCATION_ATTR in node.attr:
            before = len(node.attr[_COLOCATION_ATTR].list.s)
            _keep_colocation(node, present)
            dropped += before - len(node.attr[_COLOCATION_ATTR].list.s) if _COLOCATION_ATTR in node.attr \
                else before
    return dropped


def _keep_colocation(node: node_def_pb2.NodeDef, keep) -> None:
    entries = node.attr[_COLOCATION_ATTR].list.s if _COLOCATION_ATTR in node.attr else None
    if entries is None:
        return
    kept = [entry for entry in entries
            if not entry.startswith(b"loc:@") or keep(entry[5:].decode("utf-8", "replace"))]
    if len(kept) == len(entries):
        return
    if kept:
        del node.attr[_COLOCATION_ATTR].list.s[:]
        node.attr[_COLOCATION_ATTR].list.s.extend(kept)
    else:
        del node.attr[_COLOCATION_ATTR]


def _add_stub(view: GraphView, name: str, ports: list[Port], returned: dict[TensorRef, int],
              call_name: str, device: str) -> str:
    stub = node_def_pb2.NodeDef(name=name, device=device)
    if not ports:
        stub.op = "NoOp"
        stub.input.append("^" + call_name)
    elif len(ports) == 1:
        stub.op = "Identity"
        stub.input.append(format_input(TensorRef(call_name, returned[TensorRef(name, 0)])))
        stub.attr["T"].type = ports[0].dtype
    else:
        stub.op = "IdentityN"
        stub.input.extend(format_input(TensorRef(call_name, returned[TensorRef(name, port)]))
                          for port in range(len(ports)))
        stub.attr["T"].list.type.extend(port.dtype for port in ports)
    view.add_node(stub)
    return name


__all__ = ["OutlineResult", "outline", "forget_colocation", "function_library", "NOINLINE_ATTR",
           "NOSPECIALIZE_ATTR"]
