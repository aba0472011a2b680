"""The device-candidate test answers nodes alike by their ports once, and still sees what sets a node apart."""

from tensorflow.core.framework import graph_pb2, types_pb2

from npu_sim_bridge.ops_info import load_library
from npu_sim_bridge.passes.fusion.marks import FUSION_ATTR
from npu_sim_bridge.passes import support

FLOAT, STRING = types_pb2.DT_FLOAT, types_pb2.DT_STRING


def _node(graph, name, op, dtype=None, inputs=(), **attrs):
    node = graph.node.add(name=name, op=op)
    node.input.extend(inputs)
    if dtype is not None:
        node.attr["T"].type = dtype
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, str):
            node.attr[key].func.name = value
        else:
            node.attr[key].list.s.extend(value)
    return node


def _graph():
    graph = graph_pb2.GraphDef()
    for name in ("x", "fed_x", "s"):
        placeholder = graph.node.add(name=name, op="Placeholder")
        placeholder.attr["dtype"].type = STRING if name == "s" else FLOAT
    # Nodes alike by their ports (StopGradient, T=float) that differ in what the test reads besides.
    _node(graph, "a", "StopGradient", FLOAT, ["x"])
    _node(graph, "b", "StopGradient", FLOAT, ["x"])
    _node(graph, "fed", "StopGradient", FLOAT, ["x"])
    _node(graph, "scoped", "StopGradient", FLOAT, ["x"], _without_npu_compile=True)
    _node(graph, "no_type", "StopGradient", None, ["x"])  # lacks T: reported by name
    _node(graph, "no_type_2", "StopGradient", None, ["x"])
    _node(graph, "text", "StopGradient", STRING, ["s"])
    # A fused op whose fusion mark decides where it runs.
    for name, marked in (("fused_marked", True), ("fused_plain", False)):
        fused = _node(graph, name, "_FusedMatMul", FLOAT, ["x", "x", "x"])
        fused.attr["num_args"].i = 1
        fused.attr["fused_ops"].list.s.append(b"NoSuchOp")  # a part no device runs
        if marked:
            fused.attr[FUSION_ATTR].b = True
    # Function calls: the body decides.
    for name, body in (("call_host", "host_body"), ("call_device", "device_body")):
        call = _node(graph, name, "PartitionedCall", None, ["x"], f=body)
        call.attr["Tin"].list.type.append(FLOAT)
        call.attr["Tout"].list.type.append(FLOAT)
    for fname, op in (("host_body", "PyFunc"), ("device_body", "Relu")):
        function = graph.library.function.add()
        function.signature.name = fname
        function.signature.input_arg.add(name="i", type=FLOAT)
        function.signature.output_arg.add(name="o", type=FLOAT)
        inner = function.node_def.add(name="inner", op=op, input=["i"])
        if op == "Relu":
            inner.attr["T"].type = FLOAT
        else:
            inner.attr["Tin"].list.type.append(FLOAT)
            inner.attr["Tout"].list.type.append(FLOAT)
            inner.attr["token"].s = b"t"
        function.ret["o"] = "inner:activations:0" if op == "Relu" else "inner:output:0"
    return graph


def _tests(graph, mix=False):
    functions = {f.signature.name: f for f in graph.library.function}
    context = dict(ops_library=load_library(None), mix_compile=mix, functions=functions,
                   fed=frozenset({"fed", "fed_x"}))
    memo = support.CandidateTest(support.SupportContext(**context))
    plain = support.CandidateTest(support.SupportContext(**context))
    plain._by_ports = None  # every node asked in full
    return memo, plain


def _codes(test, graph):
    found = {}
    for node in graph.node:
        reason = test(node)
        found[node.name] = None if reason is None else reason.code
    return found


def test_nodes_alike_by_ports_get_one_answer_and_what_sets_a_node_apart_still_counts():
    graph = _graph()
    memo, plain = _tests(graph)
    codes = _codes(memo, graph)
    assert codes["a"] is None and codes["b"] is None
    assert codes["fed"] == "host.fed"
    assert codes["scoped"] == "host.scoped"
    assert codes["text"] == "host.string_op"
    assert codes["fused_marked"] is None  # judged as the MatMul it fused
    assert codes["fused_plain"] == "host.not_device_op"
    assert codes["call_host"] == "host.function_body"
    assert codes["call_device"] is None
    nodes = {node.name: node for node in graph.node}
    for name in ("no_type", "no_type_2"):
        assert codes[name] == "host.unsupported_graph"
        assert f"node {name!r}" in memo(nodes[name]).text()
    # Asked in any order, and against asking every node in full: the same answers.
    for order in (list(graph.node), list(reversed(graph.node))):
        memo, plain = _tests(graph)
        assert [memo.explain(node) for node in order] == [plain.explain(node) for node in order]
    assert memo._by_ports  # the memo was used


def test_the_memo_keys_on_the_type_attrs_and_the_mode():
    graph = _graph()
    memo, _ = _tests(graph)
    nodes = {node.name: node for node in graph.node}
    assert memo(nodes["a"]) is None
    assert memo(nodes["text"]).code == "host.string_op"  # same op, other T: asked again
    for mix in (False, True):
        memo, plain = _tests(graph, mix)
        assert _codes(memo, graph) == _codes(plain, graph)
