"""One sweep tells the precision pass which functions the graph reaches, which XLA compiles, and what
an earlier run recorded."""

from tensorflow.core.framework import graph_pb2, types_pb2

from npu_sim_bridge.passes.precision import marks
from npu_sim_bridge.passes.precision.functions import LibraryScan


def _function(graph, name, calls=(), compiled=False, marked=None):
    function = graph.library.function.add()
    function.signature.name = name
    function.signature.input_arg.add(name="x", type=types_pb2.DT_FLOAT)
    function.signature.output_arg.add(name="y", type=types_pb2.DT_FLOAT)
    previous = "x"
    for index, (callee, op, xla) in enumerate(calls):
        node = function.node_def.add(name=f"call{index}", op=op, input=[previous])
        if op != callee:  # a call op naming its function in `f`
            node.attr["f"].func.name = callee
        if xla:
            node.attr["_XlaMustCompile"].b = True
        previous = f"call{index}:output:0"
    relu = function.node_def.add(name="relu", op="Relu", input=[previous])
    relu.attr["T"].type = types_pb2.DT_FLOAT
    if marked:
        relu.attr[marks.PRECISION_ATTR].s = marked.encode()
    function.ret["y"] = "relu:activations:0"
    if compiled:
        function.attr["_XlaMustCompile"].b = True


def _graph():
    graph = graph_pb2.GraphDef()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = types_pb2.DT_FLOAT
    branch = graph.node.add(name="cond", op="If", input=["x", "x"])
    branch.attr["then_branch"].func.name = "then"
    branch.attr["else_branch"].func.name = "else"
    graph.node.add(name="direct", op="by_name", input=["x"])  # a function called by its name
    _function(graph, "then", calls=[("inner", "PartitionedCall", False), ("then", "then", False)])
    _function(graph, "else", calls=[("jit", "PartitionedCall", True)])
    _function(graph, "by_name", marked="allow_mix_precision:emulate")
    _function(graph, "inner", calls=[("deepest", "StatefulPartitionedCall", False)])
    _function(graph, "deepest")
    _function(graph, "jit", calls=[("under_jit", "PartitionedCall", False)])
    _function(graph, "under_jit")
    _function(graph, "compiled_alone", compiled=True, calls=[("compiled_callee", "PartitionedCall", False)])
    _function(graph, "compiled_callee")
    _function(graph, "unused", calls=[("deepest", "PartitionedCall", False)])
    return graph


def test_the_scan_finds_reached_and_compiled_functions_and_earlier_marks():
    graph = _graph()
    scan = LibraryScan(graph.node, {f.signature.name: f for f in graph.library.function})
    # First seen first: the graph's calls in node and attr order, then what each body calls in turn.
    assert scan.reachable() == ["else", "then", "by_name", "jit", "inner", "under_jit", "deepest"]
    assert scan.xla_compiled() == {"jit", "under_jit", "compiled_alone", "compiled_callee"}
    assert scan.marks == {"allow_mix_precision:emulate"}


def test_a_graph_without_functions_or_marks():
    graph = graph_pb2.GraphDef()
    graph.node.add(name="x", op="Placeholder")
    scan = LibraryScan(graph.node, {})
    assert scan.reachable() == [] and scan.xla_compiled() == set() and scan.marks == set()
