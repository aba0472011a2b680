"""The CPU layout across a function call: a body's result with a target-layout twin leaves the body in that
layout where the caller's graph would transpose it again.

The partition pass cuts a model into GeOps: a laid-out op in a GeOp body often feeds one in the graph
(a forward op's output read by its gradient outside the GeOp). Left alone, the body transposes the
result back to the source layout and the graph transposes it to the target layout again. Here, where
a result of a body (a function whose every caller is a node of the graph) has a twin (chains.py), and
a reader of that output in the graph is an input Transpose of a laid-out op or an op that can follow,
the body returns the twin instead, and each caller gets, under <op>/npu_sim_layout/result (<op>: the
body's node the result was), the Transpose of that output back to the source layout: the graph's
readers read it, and it is the twin of the output for the graph's second step, which cancels and
follows through it. The function's
signature is unchanged (a result's dtype is the same in either layout); the Transpose back that the
body no longer returns is pruned there when nothing else reads it.
"""

from __future__ import annotations

from tensorflow.core.framework import function_pb2

from npu_sim_bridge.graph.op_categories import CALL_OPS  # call nodes with a Tout attr
from npu_sim_bridge.graph.ports import called_by
from npu_sim_bridge.passes.layout import chains
from npu_sim_bridge.passes.layout.rewrite import SCOPE, perm_const, transpose_node



def export_results(graph: chains.Scope, bodies: dict[str, tuple[function_pb2.FunctionDef, chains.Scope]],
                   library) -> int:
    """Return twins from `bodies` ({function name: (FunctionDef, its scope after the second step)}) to the
    graph (`graph`, a scope the second step has not run on yet); the number of results exported."""
    functions = {function.signature.name: function for function in library}
    nested = {name for function in library for node in function.node_def for name in called_by(node, functions)}
    callers: dict[str, list[str]] = {}
    for name, node in graph.nodes.items():
        for callee in called_by(node, functions):
            callers.setdefault(callee, []).append(name)
    readers = chains.readers_of(graph)
    exported = 0
    for function_name, (function, body) in bodies.items():
        if function_name in nested or function_name not in callers or any(
                graph.nodes[caller].op not in CALL_OPS for caller in callers[function_name]):
            continue
        for port, arg in enumerate(function.signature.output_arg):
            twin = body.twin(function.ret[arg.name])
            if twin is None or not any(_wanted(graph, readers, caller, port) for caller in callers[function_name]):
                continue
            source = function.ret[arg.name].split(":", 1)[0]
            function.ret[arg.name] = twin.tensor
            for caller in callers[function_name]:
                _transpose_back(graph, readers, caller, port, twin.rank, source)
            exported += 1
    return exported


def _reads(text: str, caller: str, port: int) -> bool:
    return text == f"{caller}:{port}" or (port == 0 and text == caller)


def _wanted(graph: chains.Scope, readers, caller: str, port: int) -> bool:
    """Whether a data reader of output `port` of `caller` would read a twin (an input Transpose, or an op
    that can follow and that a reader would read a twin of in turn: not a fetched op alone)."""
    memo: dict[str, bool] = {}
    return any(_reads(graph.nodes[reader].input[position], caller, port) and (
        chains.is_input_transpose(graph, reader) or (chains.can_follow(graph, graph.nodes[reader])
                                                     and chains.wanted(graph, readers, reader, memo)))
        for reader, position in readers.get(caller, []))


def _transpose_back(graph: chains.Scope, readers, caller: str, port: int, rank: int, source: str) -> None:
    """Under <source>/npu_sim_layout/result (`source`: the body's node the result was; GeOp names count the
    process's graphs): the source-layout value of the output, for the readers."""
    node = graph.nodes[caller]
    const = _fresh(graph, f"{source}/{SCOPE}/perm_result")
    back = _fresh(graph, f"{source}/{SCOPE}/result")
    graph.nodes[const] = perm_const(const, rank, node.device, caller)
    graph.nodes[back] = transpose_node(back, f"{caller}:{port}", const, node.device, node.attr["Tout"].list.type[port])
    graph.added.extend([const, back])
    graph.inserted.update([const, back])
    for reader, position in readers.get(caller, []):
        if _reads(graph.nodes[reader].input[position], caller, port):
            graph.nodes[reader].input[position] = back
            graph.edited.add(reader)
    graph.twins[back] = chains.Twin(f"{caller}:{port}", const, rank)


def _fresh(graph: chains.Scope, base: str) -> str:
    name, count = base, 1
    while name in graph.taken:
        name, count = f"{base}_{count}", count + 1
    graph.taken.add(name)
    return name
