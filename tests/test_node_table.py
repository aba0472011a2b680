"""The node columns the shim hands over with a Grappler item, against the same columns read in Python."""

import functools

import pytest
import tensorflow as tf
from tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2, types_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.grappler import tf_optimizer

import npu_sim_bridge  # noqa: F401  (loads the shim)
from npu_sim_bridge.graph.table import NodeTable, main_dtype
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.native import entry
from npu_sim_bridge.graph.attr_names import SEEN_ATTR
from npu_sim_bridge.testing.grappler import npu_only_config
from npu_sim_bridge.report.model import node_dtype

_v1 = tf.compat.v1


def _graph():
    """Nodes whose main dtype comes from each rule: T, dtype, DstT, Tparams, out_type, a T list, Tin, none."""
    graph = tf.Graph()
    with graph.as_default():
        x = _v1.placeholder(tf.float32, [4, 3], name="x")
        w = tf.constant([[1.0], [2.0], [3.0]], name="w")
        y = tf.matmul(x, w, name="y")
        half = tf.cast(y, tf.float16, name="half")
        indices = tf.constant([0, 2], name="indices")
        gathered = tf.raw_ops.GatherV2(params=half, indices=indices, axis=0, name="gathered")
        shape = tf.raw_ops.Shape(input=gathered, out_type=tf.int64, name="shape")
        pair = tf.raw_ops.IdentityN(input=[y, shape], name="pair")
        with tf.name_scope("called"):
            called = tf.function(lambda a: a * 2.0)(pair[0])  # a PartitionedCall: Tin
        with tf.control_dependencies([called]):
            tf.no_op(name="train")
    return graph


def _columns_from_the_shim(graph, monkeypatch, iterations=rewriter_config_pb2.RewriterConfig.ONE):
    """(graph_def, columns) of every call Grappler made into the entry for `graph`."""
    graph.add_to_collection("train_op", graph.get_operation_by_name("train"))
    meta = _v1.train.export_meta_graph(graph=graph)
    config = npu_only_config({"precision_mode": "allow_mix_precision"}, iterations)
    calls = []
    real = entry.optimize

    def spy(item_id, graph_bytes, *rest):
        columns = rest[-1] if len(rest) == 5 else None
        if columns is not None:  # the pipeline's view takes the inputs column and edits it: keep a copy
            columns = (*columns[:2], list(columns[2]), *columns[3:])
        calls.append((graph_pb2.GraphDef.FromString(graph_bytes), columns))
        return real(item_id, graph_bytes, *rest)

    monkeypatch.setattr(entry, "optimize", spy)
    optimized = tf_optimizer.OptimizeGraph(config, meta)
    return calls, optimized


def _fields(table):
    return table.names, table.ops, table.inputs, table.dtypes, table.unstamped, table.digests


def test_the_shims_columns_are_the_ones_python_reads(monkeypatch):
    calls, _ = _columns_from_the_shim(_graph(), monkeypatch)
    assert calls and all(columns is not None for _, columns in calls)
    graph_def, columns = calls[0]
    native = NodeTable.from_columns(columns, graph_def)
    python = NodeTable.of(graph_def, stamp_attr=SEEN_ATTR, digest_attr=entry.OPTIONS_ATTR)
    assert _fields(native) == _fields(python)
    dtypes = dict(zip(native.names, native.dtypes))
    assert dtypes["x"] == dtypes["y"] == types_pb2.DT_FLOAT    # dtype, T
    assert dtypes["half"] == types_pb2.DT_HALF                 # DstT
    assert dtypes["gathered"] == types_pb2.DT_HALF             # Tparams
    assert dtypes["shape"] == types_pb2.DT_HALF                # T comes before out_type
    assert dtypes["pair"] == types_pb2.DT_FLOAT                # the first of a T list
    call = next(node.name for node in graph_def.node if node.op.endswith("PartitionedCall"))
    assert dtypes[call] == types_pb2.DT_FLOAT                  # Tin
    assert dtypes["train"] == types_pb2.DT_INVALID             # none
    # One Python string per distinct text: the input naming x is the name's own object.
    assert any(text is native.names[native.names.index("x")] for text in native.inputs[native.names.index("y")])


def test_a_stamped_graph_hands_over_its_stamps_and_digest(monkeypatch):
    """Grappler's second iteration hands back the rewritten graph: every node stamped, one digest."""
    calls, _ = _columns_from_the_shim(_graph(), monkeypatch, rewriter_config_pb2.RewriterConfig.TWO)
    second = [(graph_def, columns) for graph_def, columns in calls
              if any(SEEN_ATTR in node.attr for node in graph_def.node)]
    assert second, "the second iteration reached the entry"
    graph_def, columns = second[0]
    native = NodeTable.from_columns(columns, graph_def)
    assert _fields(native) == _fields(NodeTable.of(graph_def, stamp_attr=SEEN_ATTR, digest_attr=entry.OPTIONS_ATTR))
    assert native.unstamped == sum(SEEN_ATTR not in node.attr for node in graph_def.node)
    assert len(native.digests) == 1


def test_main_dtype_and_the_reports_dtype_name_agree():
    graph_def = _graph().as_graph_def()
    for node in graph_def.node:
        found = main_dtype(node)
        assert node_dtype(node) == (tf.dtypes.as_dtype(found).name if found else None), node.name


def test_columns_of_another_graph_fail_the_run_with_a_message():
    graph_def = _graph().as_graph_def()
    other = NodeTable.of(graph_def)
    columns = (other.names[:-1], other.ops[:-1], other.inputs[:-1], other.dtypes[:-1], 0, [])
    config = rewriter_config_pb2.RewriterConfig.CustomGraphOptimizer(name="NpuOptimizer")
    failing = graph_pb2.GraphDef.FromString(entry.optimize(
        "tf_graph", graph_def.SerializeToString(), ["train"], [], ["train"], config.SerializeToString(), columns))
    message = next(node for node in failing.node if node.name == "npu_sim_error/message")
    assert b"node columns" in message.attr["value"].tensor.string_val[0]


def test_a_view_built_from_columns_indexes_the_graph_as_from_the_protobuf():
    graph_def = _graph().as_graph_def()
    table = NodeTable.of(graph_def)
    first, second = graph_pb2.GraphDef(), graph_pb2.GraphDef()
    first.CopyFrom(graph_def)
    second.CopyFrom(graph_def)
    from_columns = GraphView(first, table=table)
    from_protobuf = GraphView(second)
    assert from_columns.records() == from_protobuf.records()
    assert from_columns.consumer_index() == from_protobuf.consumer_index()
    assert table.inputs is None, "the view takes the input lists (no copy of every input string list)"
    with pytest.raises(RuntimeError, match="taken already: one view per table"):
        GraphView(second, table=table)


def test_duplicate_names_are_refused_by_name():
    graph_def = _graph().as_graph_def()
    graph_def.node.add().CopyFrom(graph_def.node[0])
    with pytest.raises(Exception, match="duplicate node names: x"):
        GraphView(graph_def)


@functools.lru_cache(maxsize=1)  # built once: each build numbers its functions anew
def _keras_bn_meta_graph():
    from npu_sim_bridge.testing import zoo

    return zoo.keras_cnn(control_flow="v2").meta_graph_def()


def _through_grappler(monkeypatch, during_call):
    """The Keras CNN with control flow v2 through OptimizeGraph; `during_call(graph_def, columns)` runs inside each
    entry call, while the shim's graph is alive. Returns the optimized GraphDef."""
    config = npu_only_config({"precision_mode": "allow_mix_precision"})
    real = entry.optimize

    def spy(item_id, graph_bytes, *rest):
        during_call(graph_pb2.GraphDef.FromString(graph_bytes), rest[-1])
        return real(item_id, graph_bytes, *rest)

    monkeypatch.setattr(entry, "optimize", spy)
    return tf_optimizer.OptimizeGraph(config, _keras_bn_meta_graph())


def _groups(bodies, names):
    """Each name's first name with an equal body: how the bodies group the functions."""
    firsts = {}
    return [firsts.setdefault(bodies[name], name) for name in names]


def test_the_shims_alike_bodies_group_functions_as_python_does_and_expire_with_the_call(monkeypatch):
    from npu_sim_bridge.graph.alike import alike_body

    seen = []

    def compare(graph_def, columns):
        functions = {f.signature.name: f for f in graph_def.library.function}
        native = columns[6](list(functions) + ["not_in_the_library"])
        assert set(native) == set(functions)
        python = {name: alike_body(f) for name, f in functions.items()}
        assert _groups(native, functions) == _groups(python, functions)
        seen.append((len(functions), len(set(native.values())), columns[6], columns[8]))

    _through_grappler(monkeypatch, compare)
    count, distinct, alike_bodies, consumers = seen[0]
    assert count > distinct > 1, "the model has functions alike but for names"
    with pytest.raises(RuntimeError, match="alike_bodies .* gone once the call returns"):
        alike_bodies(["anything"])
    with pytest.raises(RuntimeError, match="consumers .* gone once the call returns"):
        consumers()


def _library_graph(*functions):
    graph_def = graph_pb2.GraphDef()
    graph_def.library.function.extend(functions)
    return graph_def


def _body(name, arg="x", scale=2.0, shape=(4,), wiring="x", extra_attr=None, order=("mul", "out")):
    """`name(arg) = Identity(Mul(wiring, scale))`, with a shape attr and arg attrs alike bodies may differ in."""
    function = function_pb2.FunctionDef()
    function.signature.name = name
    function.signature.input_arg.add(name=arg, type=types_pb2.DT_FLOAT)
    function.signature.output_arg.add(name="y", type=types_pb2.DT_FLOAT)
    function.arg_attr[0].attr["_user_specified_name"].s = arg.encode()
    constant = node_def_pb2.NodeDef(name="scale", op="Const")
    constant.attr["dtype"].type = types_pb2.DT_FLOAT
    constant.attr["value"].tensor.dtype = types_pb2.DT_FLOAT
    constant.attr["value"].tensor.float_val.append(scale)
    mul = node_def_pb2.NodeDef(name="mul", op="Mul", input=[arg if wiring == "x" else wiring, "scale:output:0"])
    mul.attr["T"].type = types_pb2.DT_FLOAT
    dims = mul.attr["_output_shapes"].list.shape.add().dim
    for size in shape:
        dims.add(size=size)
    if extra_attr:
        mul.attr[extra_attr].b = True
    out = node_def_pb2.NodeDef(name="out", op="Identity", input=["mul:z:0"])
    out.attr["T"].type = types_pb2.DT_FLOAT
    by_name = {"mul": mul, "out": out}
    function.node_def.extend([constant] + [by_name[key] for key in order])
    function.ret["y"] = "out:output:0"
    return function


def test_the_shims_alike_bodies_tell_alike_from_different():
    from npu_sim_bridge.graph.alike import alike_body

    functions = [
        _body("f"), _body("alike", arg="a", shape=(8,)),                    # names and shapes aside: alike
        _body("other_scale", scale=3.0), _body("other_attr", extra_attr="transpose_a"),
        _body("other_wiring", wiring="scale:output:0"), _body("other_order", order=("out", "mul")),
    ]
    names = [function.signature.name for function in functions]
    columns = _shim_columns(_library_graph(*functions))
    native = columns[6](names)
    python = {function.signature.name: alike_body(function) for function in functions}
    assert native["f"] == native["alike"]
    assert len({native[name] for name in names[1:]}) == len(names) - 1
    assert _groups(native, names) == _groups(python, names)


def _normalized(graph_def) -> str:
    """The graph as text, with its library in name order and GeOps numbered alike (each run numbers
    the graphs it rewrites; Grappler orders the library as it likes)."""
    import re

    copy = graph_pb2.GraphDef()
    copy.CopyFrom(graph_def)
    functions = sorted((str(function) for function in copy.library.function))
    copy.ClearField("library")
    return re.sub(r"GeOp\d+_", "GeOp_", str(copy) + "".join(functions))


def test_precision_decides_alike_bodies_the_same_with_the_shims_keys(monkeypatch):
    """The shim's keys only save time: the graph is the one Python's keys give."""
    from npu_sim_bridge.passes.base import PassContext

    asked = []
    real = PassContext.alike_bodies

    def counted(self, names):
        found = real(self, names)
        asked.append(len(found))
        return found

    monkeypatch.setattr(PassContext, "alike_bodies", counted)
    with_shim = _through_grappler(monkeypatch, lambda graph_def, columns: None)
    assert asked and asked[0] > 0, "the precision pass took the shim's bodies"
    monkeypatch.setattr(PassContext, "alike_bodies", lambda self, names: {})
    without = _through_grappler(monkeypatch, lambda graph_def, columns: None)
    assert _normalized(with_shim) == _normalized(without)


def _shim_columns(graph_def):
    from npu_sim_bridge.native.loader import shim_function

    kernel = shim_function("NpuSimColumns")
    assert kernel is not None, "the shim is loaded (import npu_sim_bridge)"
    return kernel((graph_def.SerializeToString(),))


def _node(graph_def, name, op, *inputs):
    graph_def.node.add(name=name, op=op, input=list(inputs))


def test_the_shims_consumer_index_and_forward_flag_are_the_views():
    # Keras' batch norm graph (hubs gathered), and the small graph with a function call.
    graphs = [_keras_bn_meta_graph().graph_def, _graph().as_graph_def()]
    for graph_def in graphs:
        columns = _shim_columns(graph_def)
        assert columns[7] is True, "TensorFlow writes producers before consumers"
        for gather in (False, True):
            first, second = graph_pb2.GraphDef(), graph_pb2.GraphDef()
            first.CopyFrom(graph_def)
            second.CopyFrom(graph_def)
            native = GraphView(first, gather_control_inputs=gather, table=NodeTable.from_columns(columns, first))
            python = GraphView(second, gather_control_inputs=gather)
            assert native.hubs == python.hubs
            assert native.consumer_index() == python.consumer_index()
            assert native.remembered_order() == native.names(), "a forward graph's order is remembered"
            columns = _shim_columns(graph_def)  # the view took the consumer index
    assert any(GraphView(graph_pb2.GraphDef.FromString(g.SerializeToString()), gather_control_inputs=True).hubs
               for g in graphs), "one of the graphs has hubs"


def test_the_shim_says_which_graphs_do_not_run_forward():
    forward = graph_pb2.GraphDef()
    _node(forward, "a", "Placeholder")
    _node(forward, "b", "Identity", "a:0")
    _node(forward, "c", "IdentityN", "b", "a:1", "^b", "missing:2")
    _node(forward, "loop", "Merge", "a", "next")
    _node(forward, "next", "NextIteration", "loop")  # a back edge: it does not count
    columns = _shim_columns(forward)
    assert columns[7] is True
    assert columns[8]() == {"a": ["b", "c", "loop"], "b": ["c", "c"], "missing": "c",
                            "next": "loop", "loop": "next"}  # a consumer once per edge; a lone one as its name
    backward = graph_pb2.GraphDef()
    backward.CopyFrom(forward)
    backward.node[0].input.append("^b")  # a reads b, which comes later
    assert _shim_columns(backward)[7] is False
    self_loop = graph_pb2.GraphDef()
    _node(self_loop, "a", "Identity", "a")
    assert _shim_columns(self_loop)[7] is False


def test_a_graph_that_does_not_run_forward_is_still_ordered_and_checked():
    """The view remembers the GraphDef order only when the shim saw it run forward."""
    from npu_sim_bridge.errors import GraphValidationError
    from npu_sim_bridge.graph.validate import topological_order, validate_graph

    graph_def = graph_pb2.GraphDef()
    _node(graph_def, "b", "Identity", "a")
    _node(graph_def, "a", "Const")
    view = GraphView(graph_def, table=NodeTable.from_columns(_shim_columns(graph_def), graph_def))
    assert view.remembered_order() is None
    validate_graph(view)
    assert topological_order(view) == ["a", "b"]
    cycle = graph_pb2.GraphDef()
    _node(cycle, "a", "Identity", "b")
    _node(cycle, "b", "Identity", "a")
    with pytest.raises(GraphValidationError, match="cycle"):
        validate_graph(GraphView(cycle, table=NodeTable.from_columns(_shim_columns(cycle), cycle)))


def test_the_shims_reach_finds_the_nodes_a_fetch_runs_as_python_does():
    """report/roles.py names a graph by what its fetches reach; the shim's C++ walk over its producer column
    finds the same nodes as the Python walk over input texts, and the same role."""
    from npu_sim_bridge.report.roles import graph_role, reached

    graph_def = _keras_bn_meta_graph().graph_def
    columns = _shim_columns(graph_def)
    table = NodeTable.from_columns(columns, graph_def)
    fetch_sets = [["loss"], ["train_op"], ["loss:0", "^train_op"], [table.names[0]], ["missing", table.names[-1]]]
    for fetch in fetch_sets:
        python = reached(table.names, table.inputs, fetch)
        position = {name: index for index, name in enumerate(table.names)}
        starts = [position[text.lstrip("^").split(":")[0]] for text in fetch
                  if text.lstrip("^").split(":")[0] in position]
        mask = table.reached(starts)
        assert len(mask) == len(table.names)
        assert {index for index, flag in enumerate(mask) if flag} == python, fetch
        assert (graph_role(table.names, table.ops, table.inputs, fetch, reached_mask=table.reached)
                == graph_role(table.names, table.ops, table.inputs, fetch))
    assert 0 < sum(table.reached([position["loss"]])) < len(table.names), "the loss does not run the update"
    assert graph_role(table.names, table.ops, table.inputs, ["train_op"], reached_mask=table.reached).name == "train"
    with pytest.raises(IndexError, match="no node at position"):
        table.reached([len(table.names)])


def test_a_pass_knows_when_no_node_came_from_an_earlier_run():
    """PassContext.came_unstamped lets passes skip looking for an earlier run's attrs: true for a graph as
    a script builds it, false for the graph a rewrite left (every node stamped) and when no table says."""
    from npu_sim_bridge.config import from_dict
    from npu_sim_bridge.passes import ItemInfo, run_pipeline
    from npu_sim_bridge.passes.base import PassContext
    from npu_sim_bridge.report.model import Report

    graph_def = _graph().as_graph_def()
    options = from_dict({"precision_mode": "allow_mix_precision"})

    def context(graph):
        table = NodeTable.of(graph, stamp_attr=SEEN_ATTR)
        return PassContext(view=GraphView(graph), options=options, item=ItemInfo(), report=Report("g", {}), table=table)

    assert context(graph_def).came_unstamped()
    rewritten = run_pipeline(graph_def, options, ItemInfo(fetch=("train",))).graph_def
    assert not context(rewritten).came_unstamped()
    partly = graph_pb2.GraphDef()
    partly.CopyFrom(graph_def)
    partly.node[0].attr[SEEN_ATTR].b = True  # one node an earlier run left is enough to look
    assert not context(partly).came_unstamped()
    assert not PassContext(view=GraphView(graph_def), options=options, item=ItemInfo(),
                           report=Report("g", {})).came_unstamped()
