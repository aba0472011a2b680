"""Where a dumped op's values come from: unseeded random ops, variable reads, the Casts precision inserted, and
the ops that update a TF1 reference variable in place (which a dump of its read must come before)."""

from __future__ import annotations

from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.op_categories import SWITCH_OPS

SCOPE = "npu_sim_dump"


def inserted_info(bview, node, data, call, main) -> dict:
    """What a Cast or rounding the precision pass inserted stands for: the op it rounds (outside the GeOp when
    the body takes it as an argument: the caller's input) and its users."""
    producer = parse_input(data[0]) if data else None
    source = bview.get(producer.node) if producer else None
    if source is not None and source.op == "_Arg":
        inputs = [text for text in call.input if not text.startswith("^")]
        index = source.attr["index"].i
        caller = parse_input(inputs[index]) if index < len(inputs) else None
        producer = caller if caller is not None and caller.node in main else producer
    users = sorted({consumer for consumer, _ in bview.data_consumers(parse_input(node.name))})
    return {"inserted_by": "precision", "producer": producer.node if producer else "",
            "producer_slot": producer.port if producer else 0, "consumers": users}


RANDOM_OPS = frozenset({
    "RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt", "RandomShuffle",
    "Multinomial", "RandomGamma", "RandomPoisson", "RandomPoissonV2", "ParameterizedTruncatedNormal",
})


def origin(bview, node, call, main) -> dict:
    """Where an op's values come from when runs may differ without a precision cause: an unseeded random op
    ({"random": "unseeded"}), or a read of a variable ({"variable": its name}), which compare relates to the
    variable's initializer."""
    if node.op in RANDOM_OPS:
        seeded = node.attr["seed"].i if "seed" in node.attr else 0
        seeded = seeded or (node.attr["seed2"].i if "seed2" in node.attr else 0)
        return {} if seeded else {"random": "unseeded"}
    if node.op not in ("Identity", "Snapshot", "ReadVariableOp") or not node.input or node.input[0].startswith("^"):
        return {}
    source = bview.get(parse_input(node.input[0]).node)
    if source is not None and source.op == "_Arg":  # a resource handle the call passes in
        index = source.attr["index"].i
        data = [text for text in call.input if not text.startswith("^")]
        source = main.get(parse_input(data[index]).node) if index < len(data) else None
    if source is None or source.op not in ("VariableV2", "Variable", "VarHandleOp"):
        return {}
    shared = source.attr["shared_name"].s.decode("utf-8", "replace") if "shared_name" in source.attr else ""
    return {"variable": shared or source.name}


_FORWARDING = frozenset({"Identity", "RefIdentity"}) | SWITCH_OPS


def mutators(view, variable: str) -> list[str]:
    """The ops that change a reference variable in place: consumers, through Identity and Switch, that take it
    as a ref input (Assign, AssignSub, ApplyMomentum, ScatterAdd, ...)."""
    from tensorflow.python.framework import op_def_registry

    found, seen, frontier = [], {variable}, [variable]
    while frontier:
        producer = frontier.pop()
        for consumer in view.consumers(producer):
            if consumer in seen or consumer.startswith(SCOPE + "/"):
                continue
            seen.add(consumer)
            node = view.node(consumer)
            if node.op in _FORWARDING:
                frontier.append(consumer)
                continue
            op_def = op_def_registry.get(node.op)
            if op_def is not None and any(arg.is_ref for arg in op_def.input_arg):
                found.append(consumer)
    return sorted(found)


def ancestors(view, name: str) -> set[str]:
    seen, frontier = {name}, [name]
    while frontier:
        for text in view.input_texts(frontier.pop()):
            producer = parse_input(text.lstrip("^")).node
            if producer not in seen and producer in view:
                seen.add(producer)
                frontier.append(producer)
    return seen


def ref_variable_read_by(view, tensor: str) -> str | None:
    """The TF1 reference variable whose buffer `tensor` shares (Identity and Switch chains from a VariableV2)."""
    from npu_sim_bridge.graph.op_categories import REF_VARIABLE_OPS

    ref = parse_input(tensor)
    for _ in range(8):
        node = view.get(ref.node)
        if node is None:
            return None
        if node.op in REF_VARIABLE_OPS:
            return node.name
        data = [text for text in node.input if not text.startswith("^")]
        if node.op not in ("Identity", "RefIdentity", "Switch", "RefSwitch") or not data:
            return None
        if node.op in ("Identity", "RefIdentity") and len(node.input) != 1:
            return None  # an Identity with control inputs may itself wait for an update: not followed
        ref = parse_input(node.input[0])
    return None
