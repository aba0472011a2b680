"""Property-based: on random graphs of device and host ops, partitioning stays valid, acyclic and exact."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import attr_value_pb2, types_pb2

import npu_sim_bridge
from npu_sim_bridge.graph.names import parse_input
from npu_sim_bridge.graph.validate import validate_graph
from npu_sim_bridge.graph.attr_names import GEOP_ATTR

v1 = tf.compat.v1
KINDS = ("add", "mul", "sub", "maximum", "tanh", "neg", "square", "py_func", "cond", "loop")
FEED = np.array([0.3, -1.2, 2.5], np.float32)
NO_GRAPPLER = v1.ConfigProto()
NO_GRAPPLER.graph_options.rewrite_options.disable_meta_optimizer = True


@st.composite
def random_graphs(draw):
    """(recipe, fetch indices, mix): each step is (kind, first input, second input, host?, control input)."""
    steps = []
    for index in range(draw(st.integers(3, 12))):
        available = index + 2  # x, a constant, then the steps before this one
        steps.append((draw(st.sampled_from(KINDS)),
                      draw(st.one_of(st.just(available - 1), st.integers(0, available - 1))),  # chains
                      draw(st.integers(0, available - 1)),
                      draw(st.integers(0, 2)) == 0,
                      draw(st.one_of(st.none(), st.integers(2, available - 1) if available > 2 else st.none()))))
    fetched = draw(st.lists(st.integers(0, len(steps) - 1), min_size=1, max_size=3, unique=True))
    return steps, fetched, draw(st.booleans())


def _shift(value):
    return (value * 0.5 + 1.0).astype(np.float32)


def _build(steps):
    """The graph of a recipe, with v1 control flow (Switch/Merge conds, Enter/Exit loops)."""
    graph = tf.Graph()
    was_v2 = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        with graph.as_default():
            tensors = [v1.placeholder(tf.float32, [3], name="x"), tf.constant([1.0, 2.0, -0.5], name="c")]
            for index, step in enumerate(steps):
                tensors.append(_step(graph, tensors, index, *step))
    finally:
        if was_v2:
            v1.enable_control_flow_v2()
    return graph, tensors


def _step(graph, tensors, index, kind, first, second, host, control):
    def host_scope():
        return graph._attr_scope({"_without_npu_compile": attr_value_pb2.AttrValue(b=host)})

    def maybe_host_tanh(value):
        with host_scope():
            return tf.tanh(value)

    a, b = tensors[first], tensors[second]
    name = f"n{index}"
    deps = [tensors[control].op] if control is not None else []
    with tf.control_dependencies(deps):
        if kind == "cond":  # the host flag applies to the true branch only
            chosen = tf.cond(tf.reduce_sum(a) > 0.0, lambda: maybe_host_tanh(tf.identity(a)), lambda: tf.negative(b))
            return tf.identity(chosen, name=name)
        if kind == "loop":
            body_op = (lambda v: v1.numpy_function(_shift, [v], tf.float32)) if host else tf.tanh
            _, looped = tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, tf.reshape(body_op(v), [3])),
                                      [tf.constant(0), a])
            return tf.identity(looped, name=name)
        with host_scope():
            if kind == "py_func":
                out = tf.identity(v1.numpy_function(_shift, [a], tf.float32), name=name)
                out.set_shape([3])
                return out
            if kind in ("add", "mul", "sub", "maximum"):
                return getattr(tf.math, {"add": "add", "mul": "multiply", "sub": "subtract",
                                         "maximum": "maximum"}[kind])(a, b, name=name)
            return getattr(tf.math, {"tanh": "tanh", "neg": "negative", "square": "square"}[kind])(a, name=name)


def _values(graph_def, fetches):
    """The fetched values for the feed and for its negation (so that conds take both branches)."""
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with v1.Session(graph=graph, config=NO_GRAPPLER) as sess:
        return [value for feed in (FEED, -FEED)
                for value in sess.run([name + ":0" for name in fetches], {"x:0": feed})]


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
# A device Switch feeding a host op in a cond branch (the dead-tensor rule), colocation with moved nodes.
@example(([("neg", 0, 0, False, None), ("cond", 2, 1, True, None), ("square", 3, 3, False, None)], [2], True))
@example(([("add", 1, 0, True, None), ("neg", 2, 2, False, 2), ("cond", 3, 0, True, None)], [2, 0], True))
# A loop around a host op between two device chains.
@example(([("tanh", 0, 0, False, None), ("loop", 2, 2, True, None), ("mul", 3, 2, False, 2)], [2], True))
def test_partitioned_random_graphs_are_valid_acyclic_and_exact(case):
    steps, fetched, mix = case
    graph, tensors = _build(steps)
    fetches = [tensors[index + 2].op.name for index in fetched]
    original = graph.as_graph_def()
    rewritten, report = npu_sim_bridge.rewrite(
        original, {"mix_compile_mode": mix, "sim_passes": "placement,partition"}, fetches=fetches)

    validate_graph(rewritten)  # no duplicate, dangling input or cycle
    calls = [node for node in rewritten.node if GEOP_ATTR in node.attr]
    assert len(calls) <= 1 or mix  # full sink keeps one GeOp
    bodies = {func.signature.name: func for func in rewritten.library.function}
    outside = {node.name for node in rewritten.node}
    inside = [node.name for call in calls for node in bodies[call.attr["f"].func.name].node_def]
    assert len(inside) == len(set(inside))  # every node runs in at most one GeOp
    assert {node.name for node in original.node} <= outside | set(inside)
    for call in calls:
        func = bodies[call.attr["f"].func.name]
        assert len(call.attr["Tin"].list.type) == len(func.signature.input_arg)
        for arg in func.signature.input_arg:
            assert arg.type not in (types_pb2.DT_STRING, types_pb2.DT_VARIANT)
        assert all(parse_input(text).node in outside for text in call.input)
    for decision in report.nodes.values():
        if decision.placement == "host":
            assert decision.reason.startswith("host: ") and decision.geop is None
    for got, expected in zip(_values(rewritten, fetches), _values(original, fetches)):
        np.testing.assert_array_equal(got, expected)

    again, _ = npu_sim_bridge.rewrite(rewritten, {"mix_compile_mode": mix, "sim_passes": "placement,partition"},
                                      fetches=fetches)
    assert again == rewritten  # a second Grappler iteration changes nothing


def _kahn_lowest_first(pred):
    """Kahn's algorithm over unit predecessor lists, the lowest ready unit first (the reference)."""
    import heapq

    succ = [[] for _ in pred]
    for unit, sources in enumerate(pred):
        for source in sources:
            succ[source].append(unit)
    pending = [len(sources) for sources in pred]
    ready = [unit for unit, count in enumerate(pending) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        unit = heapq.heappop(ready)
        order.append(unit)
        for user in succ[unit]:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    return order


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
@example(([("tanh", 0, 0, False, None), ("loop", 2, 2, True, None), ("mul", 3, 2, False, 2)], [2], True))
def test_units_are_ordered_as_kahns_lowest_first_takes_them(case):
    """Without v1 frames the units' numbering is already their order (taken in one look); with loops,
    whose frame units gather nodes from across the graph, Kahn's queue orders them. Both as the reference."""
    from npu_sim_bridge.graph import GraphView, topological_order
    from npu_sim_bridge.graph.control_flow import Frames
    from npu_sim_bridge.passes.partition import cluster

    graph, _ = _build(case[0])
    view = GraphView(graph.as_graph_def())
    order = topological_order(view)
    units = cluster._Units(view, order, Frames(view, order), set())
    assert not units.stuck
    assert list(units.order) == _kahn_lowest_first(units.pred)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_units_of_single_nodes_link_as_the_general_way_does(case):
    """With every node a unit (no frame, or every frame split), the links are read in unit order; they
    must be those the consumer index gives, loop back edges left out."""
    from npu_sim_bridge.graph import GraphView, topological_order
    from npu_sim_bridge.graph.control_flow import Frames
    from npu_sim_bridge.graph.op_categories import NEXT_ITERATION_OPS
    from npu_sim_bridge.passes.partition import cluster

    graph, _ = _build(case[0])
    view = GraphView(graph.as_graph_def())
    order = topological_order(view)
    frames = Frames(view, order)
    units = cluster._Units(view, order, frames, set(frames.top_frames()))
    assert len(units.nodes) == len(order)
    back_edge_sources = {name for name, op, _ in view.records() if op in NEXT_ITERATION_OPS}
    assert units.succ == units._links(view, back_edge_sources)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.integers(0, 2**16))
def test_edges_across_segments_are_every_input_between_two_segments(case, seed):
    """The edges a boundary would cut, for segments drawn at random over the units: every input, in node
    then input order, whose producer's unit is in another segment (control inputs only where a v1 cond
    is), loop back edges left out; where every unit is one node they are found through the links."""
    from array import array

    from npu_sim_bridge.graph import GraphView, topological_order
    from npu_sim_bridge.graph.control_flow import Frames
    from npu_sim_bridge.graph.op_categories import NEXT_ITERATION_OPS, SWITCH_OPS
    from npu_sim_bridge.passes.partition import cluster

    graph, _ = _build(case[0])
    view = GraphView(graph.as_graph_def())
    order = topological_order(view)
    units = cluster._Units(view, order, Frames(view, order), set())
    segment = array("i", np.random.default_rng(seed).integers(-1, 3, len(units.nodes)).tolist())
    records = view.records()
    ops = {name: op for name, op, _ in records}
    with_control = any(op in SWITCH_OPS for op in ops.values())
    expected = []
    for name in order:
        target = units.of[name]
        for text in view.input_texts(name):
            producer, port = parse_input(text)
            source = units.of.get(producer)
            if (source is None or source == target or segment[source] == segment[target]
                    or ops[producer] in NEXT_ITERATION_OPS or (port < 0 and not with_control)):
                continue
            expected.append((producer, port, name, source, target))
    assert units.edges_across(view, segment) == expected


def test_a_frame_fed_by_a_node_numbered_after_it_is_ordered_by_kahns_queue():
    """A loop frame is one unit, numbered at its first node; a node outside it that comes later in the
    graph but feeds one of its Enters must come before the whole frame."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    from npu_sim_bridge.graph import GraphView, topological_order
    from npu_sim_bridge.graph.control_flow import Frames
    from npu_sim_bridge.passes.partition import cluster

    graph_def = text_format.Parse("""
        node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
        node { name: "ea" op: "Enter" input: "x" attr { key: "frame_name" value { s: "f" } } }
        node { name: "y" op: "Relu" input: "x" }
        node { name: "eb" op: "Enter" input: "y" attr { key: "frame_name" value { s: "f" } } }
        node { name: "sum" op: "AddV2" input: "ea" input: "eb" }
        node { name: "out" op: "Exit" input: "sum" }
        node { name: "z" op: "Relu" input: "out" }
    """, graph_pb2.GraphDef())
    view = GraphView(graph_def)
    order = topological_order(view)
    units = cluster._Units(view, order, Frames(view, order), set())
    frame, y = units.of["ea"], units.of["y"]
    assert units.of["eb"] == frame and y > frame
    assert list(units.order) == _kahn_lowest_first(units.pred)
    assert units.order.index(y) < units.order.index(frame)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40).flatmap(lambda count: st.tuples(
    st.just(count),
    st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)), max_size=3 * count),
    st.lists(st.booleans(), min_size=count, max_size=count),
    st.sets(st.integers(0, count - 1), max_size=3))))
def test_the_shims_segment_kernel_answers_as_the_python_one(case):
    """Layers, reach and segments of random unit graphs: NpuSimSegments against _segments_py, also
    with units left out of the order (a cycle's) and edges into and out of them."""
    from types import SimpleNamespace

    from npu_sim_bridge.native.loader import shim_function
    from npu_sim_bridge.passes.partition import cluster

    count, edges, device, left_out = case
    succ = [sorted({b for a, b in edges if a == unit and a < b}) for unit in range(count)]
    pred = [sorted({a for a, b in edges if b == unit and a < b}) for unit in range(count)]
    order = [unit for unit in range(count) if unit not in left_out]
    units = SimpleNamespace(order=order, pred=pred, succ=succ, nodes=[[f"n{unit}"] for unit in range(count)])
    assert shim_function("NpuSimSegments") is not None, "the shim is loaded in tests"
    expected = cluster._segments_py(units, device)
    found = cluster._segments(units, device)  # the kernel's bytes as arrays
    assert found == expected
    assert [values.typecode for values in found[2:]] == [values.typecode for values in expected[2:]] == ["i", "f"]
    assert found[0].typecode == expected[0].typecode == "i"
    assert [members.typecode for members in found[1]] == [members.typecode for members in expected[1]]
    # Every device unit in order is in exactly the segment segment_of names, host units in none.
    segment_of, segments = found[0], found[1]
    assert sorted(unit for members in segments for unit in members) == sorted(u for u in order if device[u])
    assert all(segment_of[unit] == index for index, members in enumerate(segments) for unit in members)
    assert all(segment_of[unit] == -1 for unit in range(count) if not device[unit] or unit in left_out)


def test_the_segment_kernel_refuses_units_out_of_range():
    from npu_sim_bridge.native.loader import shim_function

    kernel = shim_function("NpuSimSegments")
    with pytest.raises(ValueError, match="out of range"):
        kernel(([0, 1], [[1], [5]], [True, True]))
    with pytest.raises(TypeError):
        kernel(([0], [[]]))


def test_the_segment_kernel_reads_links_in_one_piece_as_lists():
    """The units' links as two int32 arrays (units.Links) give the kernel's answer for the same lists; starts
    that do not run from 0 to the targets' length are refused."""
    from array import array

    from npu_sim_bridge.native.loader import shim_function
    from npu_sim_bridge.passes.partition.units import Links

    kernel = shim_function("NpuSimSegments")
    lists = [[1, 2], [3], [3], [], [5], []]
    links = Links.of_lists(lists)
    assert list(map(list, links)) == lists and links.run_forward()
    device = bytearray([1, 1, 0, 1, 1, 1])
    assert kernel((None, (links.starts, links.targets), device)) == kernel((None, lists, device))
    with pytest.raises(ValueError, match="starts must run from 0"):
        kernel((None, (array("i", [0, 2, 9]), array("i", [1, 1])), bytearray(2)))
    with pytest.raises(TypeError, match="int32"):
        kernel((None, (array("q", [0, 0]), array("i")), bytearray(1)))


def _reference_guards(view, units):
    """The cond guards by their definition (passes/partition/regions.py), every unit worked out."""
    from npu_sim_bridge.graph.op_categories import MERGE_OPS, SWITCH_OPS

    empty, unit_guard, switch_guard = frozenset(), {}, {}

    def guard(producer, port):
        if producer in switch_guard:
            pair = switch_guard[producer]
            return pair[0] | pair[1] if port < 0 else pair[min(port, 1)]
        return unit_guard.get(units.of[producer], empty)

    for unit in units.order:
        nodes = units.nodes[unit]
        if units.frame[unit]:
            unit_guard[unit] = empty.union(*(
                guard(producer, port) for name in nodes for producer, port in map(parse_input, view.input_texts(name))
                if producer in view and producer not in units.back_edge_sources and units.of[producer] != unit))
            continue
        data, control = [], empty
        for producer, port in map(parse_input, view.input_texts(nodes[0])):
            if producer in units.of and producer not in units.back_edge_sources:
                if port < 0:
                    control |= guard(producer, port)
                else:
                    data.append(guard(producer, port))
        if view.op(nodes[0]) in MERGE_OPS:
            unit_guard[unit] = (frozenset.intersection(*data) if data else empty) | control
        else:
            unit_guard[unit] = control.union(*data)
            if view.op(nodes[0]) in SWITCH_OPS:
                switch_guard[nodes[0]] = (unit_guard[unit] | {(nodes[0], 0)}, unit_guard[unit] | {(nodes[0], 1)})
    return guard


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_cond_guards_and_regions_are_their_definitions(case):
    """branch_guards looks only at the units a Switch or a guarded tensor reaches; every tensor's guard must
    still be the definition's, and the cond regions (each node joined with the Switches of its guard, a
    Merge with those of its data inputs', in unit order) those the guards give."""
    from npu_sim_bridge.graph import GraphView, topological_order
    from npu_sim_bridge.graph.control_flow import Frames
    from npu_sim_bridge.graph.op_categories import MERGE_OPS
    from npu_sim_bridge.passes.partition import cluster, regions

    graph, _ = _build(case[0])
    view = GraphView(graph.as_graph_def())
    order = topological_order(view)
    units = cluster._Units(view, order, Frames(view, order), set())
    guards, expected = regions.branch_guards(view, units), _reference_guards(view, units)
    assert all(guards(name, port) == expected(name, port)
               for unit in units.order for name in units.nodes[unit] for port in (-1, 0, 1))
    component = {}
    for unit in units.order:
        if units.frame[unit]:
            continue
        name = units.nodes[unit][0]
        if view.op(name) in MERGE_OPS:
            reads = [parse_input(text) for text in view.input_texts(name)]
            switches = {switch for producer, port in reads if port >= 0 and producer in units.of
                        and producer not in units.back_edge_sources for switch, _ in expected(producer, port)}
        else:
            switches = {switch for switch, _ in expected(name, -1)}
        for switch in switches:
            if switch in units.of and not units.frame[units.of[switch]]:
                merged = component.get(name, {name}) | component.get(switch, {switch})
                component.update(dict.fromkeys(merged, merged))
    rank = {units.nodes[unit][0]: index for index, unit in enumerate(units.order)}
    groups = {frozenset(members) for members in component.values() if len(members) > 1}
    want = sorted((sorted(members, key=rank.get) for members in groups), key=lambda members: rank[members[0]])
    assert regions.cond_regions(view, units, guards) == want
    has_cond = any(op == "Switch" for _, op, _ in view.records())
    assert (guards is regions.no_guards) == (not has_cond)
