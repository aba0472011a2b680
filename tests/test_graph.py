"""GraphView indexes under mutation, validation errors, and topological order."""

import re

import pytest
import tensorflow as tf
from google.protobuf import text_format
from hypothesis import given, settings, strategies as st
from tensorflow.core.framework import graph_pb2, node_def_pb2

from npu_sim_bridge.errors import GraphValidationError
from npu_sim_bridge.graph import GraphView, TensorRef, parse_input, topological_order, validate_graph
from npu_sim_bridge.graph.journal import EditJournal
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.table import edges


def _graph(text):
    return text_format.Parse(text, graph_pb2.GraphDef())


CHAIN = """
node { name: "a" op: "Placeholder" }
node { name: "b" op: "Relu" input: "a" }
node { name: "c" op: "AddV2" input: "b" input: "a" input: "^b" }
"""


def test_parse_input_forms():
    assert parse_input("x") == TensorRef("x", 0)
    assert parse_input("x:2") == TensorRef("x", 2)
    assert parse_input("^x") == TensorRef("x", -1)
    assert parse_input("scope/x:0") == TensorRef("scope/x", 0)
    assert parse_input("x:y") == TensorRef("x:y", 0) and parse_input("") == TensorRef("", 0)
    for text in ("x", "x:2", "^x", "scope/x:0", "x:y", ""):
        assert node_name(text) == parse_input(text).node


def test_a_plain_name_parses_to_itself_with_no_copy():
    """A rewrite parses every input string, and most are a plain node name: its node part is the same
    str object (the index and the passes keep one str per name), and nothing is cached."""
    plain = "".join(["layer_7/", "MatMul"])  # a str of its own, not a literal constant
    assert parse_input(plain) == TensorRef(plain, 0) and parse_input(plain).node is plain
    assert node_name(plain) is plain
    assert parse_input("layer_7/Split:1") == TensorRef("layer_7/Split", 1)
    assert node_name("^layer_7/Split") == "layer_7/Split" == node_name("layer_7/Split:1")
    assert not hasattr(parse_input, "cache_info")


def test_consumer_index_follows_mutations():
    view = GraphView(_graph(CHAIN))
    assert view.consumers("a") == ["b", "c"]
    assert view.data_consumers(TensorRef("b", 0)) == [("c", 0)]
    view.add_node(node_def_pb2.NodeDef(name="d", op="Identity", input=["a"]))
    assert view.replace_uses(TensorRef("a", 0), TensorRef("d", 0), exclude={"d"}) == 2
    assert view.consumers("a") == ["d"]
    assert view.consumers("d") == ["b", "c"]
    view.add_input("c", "^a")
    view.add_input("c", "e_missing:1")
    assert list(view.node("c").input) == ["b", "d", "e_missing:1", "^b", "^a"]
    view.remove_input("c", 2)
    view.remove_input("c", 3)
    assert view.consumers("a") == ["d"]
    with pytest.raises(GraphValidationError, match="still read by b, c"):
        view.remove_node("d")


def test_the_consumer_index_holds_a_lone_consumer_as_its_name():
    view = GraphView(_graph(CHAIN))
    index = view.consumer_index()
    assert index["a"] == ["b", "c"] and index["b"] == ["c", "c"]
    view.remove_input("c", 2)  # ^b: one edge from b is left, held as the name
    assert index["b"] == "c" and list(edges(index["b"])) == ["c"]
    view.add_node(node_def_pb2.NodeDef(name="d", op="Identity", input=["c"]))
    assert index["c"] == "d" and view.consumers("c") == ["d"]
    view.add_input("b", "^c")  # a second edge: a list again
    assert sorted(index["c"]) == ["b", "d"]
    view.set_input("c", 0, "a")  # b's last edge goes: no entry
    assert "b" not in index and view.consumers("b") == []
    validate_graph(view)


def test_a_name_read_before_its_node_is_added_gets_its_consumers_when_it_comes():
    view = GraphView(_graph(CHAIN + 'node { name: "late_reader" op: "Identity" input: "late:1" }'))
    index = view.consumer_index()
    assert view.missing_producers() == {"late": "late_reader"} and index["late"] == "late_reader"
    with pytest.raises(GraphValidationError, match="late_reader <- late"):
        validate_graph(view)
    view.add_node(node_def_pb2.NodeDef(name="late", op="Unpack", input=["a"]))
    assert view.missing_producers() == {} and view.consumers("late") == ["late_reader"]
    assert sorted(index["a"]) == ["b", "c", "late"] and dict(index.items())["late"] == "late_reader"
    validate_graph(view)


def test_the_consumer_index_keeps_to_its_nodes_across_compaction():
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Identity" input: "c" }'))
    view.set_input("d", 0, "b")
    view.remove_node("c")
    view.compact()
    assert [node.name for node in view.graph_def.node] == ["a", "b", "d"]
    assert (view.consumers("a"), view.consumers("b"), view.consumers("d")) == (["b"], ["d"], [])
    assert dict(view.consumer_index().items()) == {"a": "b", "b": "d"}
    view.add_node(node_def_pb2.NodeDef(name="e", op="Identity", input=["d"]))
    assert view.consumers("d") == ["e"] and view.consumer_index() == {"a": "b", "b": "d", "d": "e"}


def test_a_consumer_reading_a_producer_twice_stays_a_consumer_until_both_edges_go():
    view = GraphView(_graph(CHAIN))
    assert view.consumers("b") == ["c"]  # c reads b twice (data and control): listed once
    assert sorted(view.consumer_index()["b"]) == ["c", "c"]
    view.remove_input("c", 2)  # ^b
    assert view.consumers("b") == ["c"]
    with pytest.raises(GraphValidationError, match="still read by c"):
        view.remove_node("b")
    view.set_input("c", 0, "a")
    assert view.consumers("b") == [] and sorted(view.consumer_index()["a"]) == ["b", "c", "c"]
    view.remove_node("b")
    assert "b" not in view


def test_add_node_keeps_the_callers_strings_and_checks_them():
    view = GraphView(_graph(CHAIN))
    name, inputs = "".join(["ca", "st"]), ["".join(["a"])]  # new str objects, equal to the node's
    view.add_node(node_def_pb2.NodeDef(name="cast", op="Cast", input=["a"]), name, inputs)
    assert next(key for key in view.graph_order_names() if key == "cast") is name
    assert view.input_texts("cast")[0] is inputs[0] and view.consumers("a") == ["b", "c", "cast"]
    with pytest.raises(ValueError, match="name 'other' for a node named 'd'"):
        view.add_node(node_def_pb2.NodeDef(name="d", op="Cast", input=["a"]), "other")
    with pytest.raises(ValueError, match=r"inputs \['b'\] for node 'd', which reads \['a'\]"):
        view.add_node(node_def_pb2.NodeDef(name="d", op="Cast", input=["a"]), "d", ["b"])
    assert "d" not in view


def test_remove_and_compact_keep_indexes_consistent():
    view = GraphView(_graph(CHAIN))
    view.set_input("c", 2, "^a")
    view.replace_uses(TensorRef("b", 0), TensorRef("a", 0))
    view.remove_node("b")
    assert "b" not in view and [n.name for n in view.nodes()] == ["a", "c"]
    graph_def = view.to_graph_def()
    assert [n.name for n in graph_def.node] == ["a", "c"]
    assert view.consumers("a") == ["c"]
    assert view.unique_name("b") == "b" and view.unique_name("a") == "a_1"


def test_names_find_their_nodes_before_and_after_compact():
    """The view finds a node by its place in the GraphDef: places stay right while removed nodes
    wait for compact, for nodes added meanwhile, and after compact moves the rest up."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Identity" input: "c" }\n'))
    view.set_input("d", 0, "a")
    view.remove_node("c")
    view.add_node(node_def_pb2.NodeDef(name="e", op="Identity", input=["d"]))
    # A removed node keeps its place until compact, and an added one comes after every other.
    assert [view.place(name) for name in ("a", "b", "d", "e")] == [0, 1, 3, 4] and view.place_count() == 5
    for when in ("before compact", "after compact"):
        assert [(name, node.name) for name, node in view.named_nodes()] == [
            ("a", "a"), ("b", "b"), ("d", "d"), ("e", "e")], when
        assert [view.node(name).op for name in ("a", "b", "d", "e")] == [
            "Placeholder", "Relu", "Identity", "Identity"], when
        assert view.get("c") is None and view.records()[-1][:2] == ("e", "Identity"), when
        view.compact()
    assert [node.name for node in view.to_graph_def().node] == ["a", "b", "d", "e"]
    assert [view.place(name) for name in ("a", "b", "d", "e")] == [0, 1, 2, 3] and view.place_count() == 4


def test_remove_nodes_takes_a_set_that_reads_itself():
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Identity" input: "c" }\n'))
    with pytest.raises(GraphValidationError, match="'c': still read by d"):
        view.remove_nodes(["b", "c"])
    view.set_input("d", 0, "a")
    view.remove_nodes(["b", "c"])
    assert [n.name for n in view.nodes()] == ["a", "d"]
    assert view.consumers("a") == ["d"] and view.consumers("b") == []
    kept = view.node("d")
    graph_def = view.to_graph_def()
    assert [n.name for n in graph_def.node] == ["a", "d"]
    kept.attr["T"].type = 1  # the view's NodeDef is still the one stored in the GraphDef
    assert graph_def.node[1].attr["T"].type == 1 and view.node("d") is kept


def test_journal_records_what_the_mutators_did():
    view = GraphView(_graph(CHAIN))
    journal = view.open_journal()
    assert not journal.changed(view)
    view.add_node(node_def_pb2.NodeDef(name="cast", op="Cast", input=["b"]))
    view.set_input("c", 0, "cast")
    view.set_input("c", 1, "b")  # a second change keeps the inputs c had when the journal opened
    before = ("b", "a", "^b")
    assert list(journal.added) == ["cast"] and list(journal.rewired()) == ["c"]
    assert journal.edits("c") == [(EditJournal.SET, 0, "b"), (EditJournal.SET, 1, "a")]
    assert journal.inputs_before(view, "c") == before and journal.changed(view)
    view.set_input("c", 0, "b")
    view.set_input("c", 1, "a")  # back to the inputs it had: nothing differs but the added node
    assert journal.changed(view) and tuple(view.input_texts("c")) == journal.inputs_before(view, "c") == before
    view.close_journal()
    view.remove_input("c", 2)
    assert not journal.removed and list(journal.rewired()) == ["c"] and len(journal.edits("c")) == 4


def test_journal_undoes_insertions_and_deletions_exactly():
    """Inputs added, removed and replaced in any order are put back to what the node had, slot by slot:
    an input list that differs from the one before in any string is seen as changed."""
    view = GraphView(_graph(CHAIN))
    journal = view.open_journal()
    view.add_input("c", "^a")
    view.add_input("c", "a:1")  # a data input goes before the control inputs
    view.remove_input("c", -1)
    view.set_input("c", 0, "a")
    view.remove_input("c", 1)
    assert list(view.input_texts("c")) == ["a", "a:1", "^b"]
    assert journal.inputs_before(view, "c") == ("b", "a", "^b") and journal.changed(view)
    assert [kind for kind, _, _ in journal.edits("c")] == [EditJournal.INSERT, EditJournal.INSERT,
                                                           EditJournal.DELETE, EditJournal.SET,
                                                           EditJournal.DELETE]
    view.remove_input("c", 1)
    view.add_input("c", "a")
    view.set_input("c", 0, "b")
    assert tuple(view.input_texts("c")) == ("b", "a", "^b") and not journal.changed(view)


def test_journal_skips_added_nodes_and_follows_compaction():
    """A node added since the journal opened is not 'rewired'; a rewired node keeps its entry when
    the nodes before it are compacted away, and one rewired after that is recorded once too."""
    view = GraphView(_graph(CHAIN))
    journal = view.open_journal()
    view.add_node(node_def_pb2.NodeDef(name="cast", op="Cast", input=["b"]))
    view.set_input("cast", 0, "a")
    assert list(journal.rewired()) == []
    view.set_input("c", 0, "cast")
    view.remove_input("c", 2)
    view.remove_input("c", 0)  # c no longer reads b: b may go
    view.remove_node("b")
    view.compact()
    view.set_input("c", 0, "a")  # rewired again after compaction: still one entry
    assert list(journal.rewired()) == ["c"] and journal.inputs_before(view, "c") == ("b", "a", "^b")


def test_journal_knows_the_added_nodes_across_compaction():
    """The nodes added since the journal opened are the places from a mark on: compacting the removed
    nodes away moves the mark with them, and a node added then removed is no longer listed."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Relu" input: "a" }'))
    view.remove_node("d")
    journal = view.open_journal()
    view.add_node(node_def_pb2.NodeDef(name="cast", op="Cast", input=["b"]))
    view.add_node(node_def_pb2.NodeDef(name="gone", op="Cast", input=["b"]))
    view.remove_node("gone")
    assert list(journal.added) == ["cast"] and "cast" in journal.added and "b" not in journal.added
    view.compact()  # d, before the mark, and gone, after it, leave the GraphDef
    view.add_node(node_def_pb2.NodeDef(name="later", op="Cast", input=["a"]))
    assert list(journal.added) == ["cast", "later"]
    assert "c" not in journal.added and "gone" not in journal.added and "d" not in journal.added
    assert journal.changed(view) and list(journal.removed) == ["gone"]


class _Column:
    """An outside column by place, as a pass keeps one (say partition's units): a value per place."""

    def __init__(self, view):
        self.values = [view.place(name) * 10 for name in view.graph_order_names()]
        self.place = view.place

    def drop_places(self, start, end):
        del self.values[start:end]

    def __getitem__(self, name):
        return self.values[self.place(name)]


def test_compact_cuts_the_columns_a_pass_tracks_in_step():
    """A column by place the view tracks still gives each live node its value after compact renumbers
    the places; one no longer tracked is left as it was."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Relu" input: "a" }'))
    tracked, left = _Column(view), _Column(view)
    view.track_places(tracked)
    view.track_places(left)
    view.untrack_places(left)
    view.remove_input("c", 2)
    view.remove_input("c", 0)
    view.remove_node("b")
    view.compact()
    assert [view.place(name) for name in ("a", "c", "d")] == [0, 1, 2]
    assert [tracked[name] for name in ("a", "c", "d")] == [0, 20, 30]
    assert len(left.values) == 4


def test_a_removed_name_taken_again_keeps_only_the_new_node():
    """compact drops removed nodes by place: the NodeDef a name had before it was removed goes, the
    node added under that name since stays, in both nodes() and the GraphDef."""
    view = GraphView(_graph(CHAIN))
    view.remove_node("c")
    view.add_node(node_def_pb2.NodeDef(name="c", op="Identity", input=["a"]))
    assert [(node.name, node.op) for node in view.nodes()] == [("a", "Placeholder"), ("b", "Relu"), ("c", "Identity")]
    graph = view.to_graph_def()
    assert [(node.name, node.op) for node in graph.node] == [("a", "Placeholder"), ("b", "Relu"), ("c", "Identity")]
    assert view.op("c") == "Identity" and list(view.input_texts("c")) == ["a"]
    assert sorted(view.consumers("a")) == ["b", "c"] and view.consumers("b") == []


def test_duplicate_names_are_rejected():
    with pytest.raises(GraphValidationError, match="duplicate node names: a"):
        validate_graph(_graph(CHAIN + 'node { name: "a" op: "Const" }'))


def test_dangling_input_is_named():
    with pytest.raises(GraphValidationError, match="b <- ghost:1"):
        validate_graph(_graph('node { name: "b" op: "Relu" input: "ghost:1" }'))


def test_cycle_names_its_nodes():
    text = """
    node { name: "p" op: "AddV2" input: "q" }
    node { name: "q" op: "Relu" input: "p" }
    """
    with pytest.raises(GraphValidationError, match="cycle through nodes p, q"):
        validate_graph(_graph(text))


def test_v1_while_loop_is_a_legal_cycle():
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.disable_control_flow_v2()
        try:
            i = tf.constant(0)
            tf.compat.v1.while_loop(lambda i: i < 5, lambda i: i + 1, [i])
        finally:
            tf.compat.v1.enable_control_flow_v2()
    graph_def = graph.as_graph_def()
    assert any(n.op == "NextIteration" for n in graph_def.node)
    validate_graph(graph_def)
    order = topological_order(graph_def)
    assert order.index("while/Enter") < order.index("while/Merge") < order.index("while/Exit")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=30), max_size=3), min_size=1, max_size=30))
def test_topological_order_respects_every_edge(edges):
    graph_def = graph_pb2.GraphDef()
    for index, inputs in enumerate(edges):
        node = graph_def.node.add(name=f"n{index}", op="AddN")
        node.input.extend(f"n{j}" for j in inputs if j < index)  # only earlier nodes: acyclic
    graph_def.node.reverse()  # order in the GraphDef must not matter
    order = topological_order(graph_def)
    assert topological_order(GraphView(graph_def)) == order  # the indexed path agrees
    position = {name: i for i, name in enumerate(order)}
    for node in graph_def.node:
        for text in node.input:
            assert position[parse_input(text).node] < position[node.name]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=20), max_size=3), min_size=1, max_size=20),
       st.booleans(), st.randoms(use_true_random=False))
def test_the_view_orders_as_kahn_does_in_any_graphdef_order(edges, keep_order, rng):
    """Graphs already in topological order (as TensorFlow writes them) take the view's one-sweep path;
    any other order, and a cycle (edges to later nodes make them), must come out as plain Kahn's does."""
    graph_def = graph_pb2.GraphDef()
    for index, inputs in enumerate(edges):
        node = graph_def.node.add(name=f"n{index}", op="AddN")
        node.input.extend(f"n{j}" for j in inputs if j < len(edges))
    if not keep_order:
        nodes = list(graph_def.node)
        rng.shuffle(nodes)
        graph_def = graph_pb2.GraphDef(node=nodes)
    try:
        expected = topological_order(graph_def)
    except GraphValidationError as err:
        with pytest.raises(GraphValidationError, match=re.escape(str(err))):
            topological_order(GraphView(graph_def))
        return
    assert topological_order(GraphView(graph_def)) == expected


def test_checks_after_edits_catch_a_new_cycle_and_a_missing_input():
    view = GraphView(_graph(CHAIN))
    validate_graph(view)  # the complete check
    view.add_node(node_def_pb2.NodeDef(name="b/cast", op="Cast", input=["b"]))
    view.set_input("c", 0, "b/cast")
    validate_graph(view)  # a node spliced into an edge keeps the graph acyclic
    view.set_input("b", 0, "c")  # b now reads c, which reads b through the cast
    with pytest.raises(GraphValidationError, match="cycle through nodes b, c, b/cast"):
        validate_graph(view)
    view.set_input("b", 0, "a")
    validate_graph(view)
    view.add_input("c", "ghost:1")
    with pytest.raises(GraphValidationError, match="c <- ghost"):
        validate_graph(view)


def _copy_view(view):
    copy = graph_pb2.GraphDef()
    copy.CopyFrom(view.graph_def)
    return GraphView(copy)


def _outcome(view):
    try:
        validate_graph(view)
    except GraphValidationError as err:
        return str(err).split(":")[1]  # the kind of problem: missing nodes or a cycle
    return "valid"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=20), max_size=3), min_size=2, max_size=20),
       st.lists(st.tuples(st.sampled_from(["add", "set", "extra"]), st.integers(0, 40), st.integers(0, 40)),
                min_size=1, max_size=12))
def test_checks_after_edits_agree_with_a_complete_check(edges, edits):
    graph_def = graph_pb2.GraphDef()
    for index, inputs in enumerate(edges):
        node = graph_def.node.add(name=f"n{index}", op="NextIteration" if index == 1 else "AddN")
        node.input.extend(f"n{j}" for j in inputs if j < index)
    view = GraphView(graph_def)
    validate_graph(view)
    for step, (kind, first, second) in enumerate(edits):
        names = [node.name for node in view.nodes()]
        target, source = names[first % len(names)], names[second % len(names)]
        if kind == "add":
            view.add_node(node_def_pb2.NodeDef(name=f"new{step}", op="Cast", input=[source]))
            if view.consumers(target) or target != f"new{step}":
                view.add_input(target, f"new{step}")
        elif kind == "set" and view.node(target).input:
            view.set_input(target, 0, source)
        else:
            view.add_input(target, "^" + source)
        expected = _outcome(_copy_view(view))
        assert _outcome(view) == expected
        if expected != "valid":
            break


def _node(op, **types):
    node = node_def_pb2.NodeDef(name=f"n_{op}", op=op)
    for key, value in types.items():
        node.attr[key].type = value
    return node


def test_string_ports_follow_each_node_s_type_attr_not_the_first_node_of_its_op():
    from tensorflow.core.framework import types_pb2

    from npu_sim_bridge.errors import UnsupportedGraphError
    from npu_sim_bridge.graph.ports import has_port_of_type

    string, floats = _node("Identity", T=types_pb2.DT_STRING), _node("Identity", T=types_pb2.DT_FLOAT)
    for _ in range(2):  # asked again: the cached answers stay per attr value
        assert has_port_of_type(string, types_pb2.DT_STRING)
        assert not has_port_of_type(floats, types_pb2.DT_STRING)
        assert has_port_of_type(floats, types_pb2.DT_FLOAT)
    with pytest.raises(UnsupportedGraphError, match="lacks attribute 'T'"):
        has_port_of_type(_node("Identity"), types_pb2.DT_STRING)


def test_ports_follow_each_node_s_attrs_when_kept_per_port_key():
    from tensorflow.core.framework import types_pb2

    from npu_sim_bridge.errors import UnsupportedGraphError
    from npu_sim_bridge.graph.ports import input_ports, output_ports

    def add_n(count, dtype):
        node = _node("AddN", T=dtype)
        node.attr["N"].i = count
        return node

    def identity_n(*dtypes):
        node = _node("IdentityN")
        node.attr["T"].list.type.extend(dtypes)
        return node

    for _ in range(2):  # asked again: the kept answers stay per attr value
        assert [p.dtype for p in input_ports(add_n(3, types_pb2.DT_FLOAT))] == [types_pb2.DT_FLOAT] * 3
        assert [p.dtype for p in input_ports(add_n(2, types_pb2.DT_INT32))] == [types_pb2.DT_INT32] * 2
        assert [p.dtype for p in output_ports(add_n(2, types_pb2.DT_INT32))] == [types_pb2.DT_INT32]
        outputs = output_ports(identity_n(types_pb2.DT_FLOAT, types_pb2.DT_STRING))
        assert [(p.arg, p.index, p.dtype) for p in outputs] == [
            ("output", 0, types_pb2.DT_FLOAT), ("output", 1, types_pb2.DT_STRING)]
        assert [p.dtype for p in output_ports(identity_n(types_pb2.DT_HALF))] == [types_pb2.DT_HALF]
        with pytest.raises(UnsupportedGraphError, match="lacks attribute 'N'"):
            input_ports(_node("AddN", T=types_pb2.DT_FLOAT))


def test_function_attrs_are_those_of_the_op_def():
    from npu_sim_bridge.graph.ports import function_attrs

    assert function_attrs("If") == ("else_branch", "then_branch")
    assert function_attrs("StatefulPartitionedCall") == ("f",)
    assert function_attrs("AddV2") == ()
    assert function_attrs("my_library_function") is None


def test_called_by_names_the_functions_a_node_runs():
    from npu_sim_bridge.graph.ports import called_by

    if_node = node_def_pb2.NodeDef(name="cond", op="If")
    if_node.attr["then_branch"].func.name = "yes"
    if_node.attr["else_branch"].func.name = "no"
    if_node.attr["_extra"].func.name = "not_called"  # not an attr of If's OpDef: the kernel never calls it
    assert called_by(if_node, {}) == ["no", "yes"]
    by_name = node_def_pb2.NodeDef(name="call", op="my_function")
    by_name.attr["f"].func.name = "inner"  # an unregistered op: every func attr counts
    assert called_by(by_name, {"my_function": None}) == ["my_function", "inner"]


def test_the_order_validation_found_is_reused_until_the_graph_is_edited():
    view = GraphView(_graph(CHAIN))
    validate_graph(view)
    first = topological_order(view)
    assert first == ["a", "b", "c"]
    first.reverse()  # the caller's copy: the remembered order is not touched
    assert topological_order(view) == ["a", "b", "c"]
    # A caller that only reads gets the remembered list itself, the same one each time, no copy.
    shared = topological_order(view, read_only=True)
    assert shared == ["a", "b", "c"] and topological_order(view, read_only=True) is shared
    assert topological_order(view) is not shared
    # d is added after c in the GraphDef but now feeds b: the order must change with the edit.
    view.add_node(node_def_pb2.NodeDef(name="d", op="Identity", input=["a"]))
    view.set_input("b", 0, TensorRef("d", 0))
    assert view.names() == ["a", "b", "c", "d"]  # the index order: GraphDef order
    assert topological_order(view) == ["a", "d", "b", "c"]
    view.remove_input("c", 2)  # drops ^b: an edit that adds no node and touches no rank
    view.set_input("c", 0, TensorRef("d", 0))
    view.remove_input("b", 0)
    assert topological_order(view) == ["a", "b", "d", "c"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=20), max_size=3), min_size=1, max_size=20),
       st.lists(st.tuples(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40)),
                max_size=6))
def test_a_validated_view_orders_added_nodes_right_after_their_inputs(edges, casts):
    """After an edit and its validation, the order comes from the ranks validation left: the nodes of
    the last complete check keep their order, an inserted node sits right after the input it reads
    (ties in insertion order), and every edge still runs forward."""
    graph_def = graph_pb2.GraphDef()
    for index, inputs in enumerate(edges):
        node = graph_def.node.add(name=f"n{index}", op="AddN")
        node.input.extend(f"n{j}" for j in inputs if j < index)
    view = GraphView(graph_def)
    validate_graph(view)
    before = topological_order(view)
    inserted = []
    for number, (producer, consumer) in enumerate(casts):  # a Cast on an edge, or off a producer
        producer = inserted[producer % len(inserted)] if inserted and producer % 2 else before[producer % len(before)]
        cast = f"cast{number}"
        view.add_node(node_def_pb2.NodeDef(name=cast, op="Cast", input=[producer]))
        users = [user for user in view.consumers(producer) if user != cast and not user.startswith("cast")]
        if users:
            user = users[consumer % len(users)]
            index = next(i for i, text in enumerate(view.input_texts(user)) if parse_input(text).node == producer)
            view.set_input(user, index, cast)
        inserted.append(cast)
    validate_graph(view)
    order = topological_order(view)
    assert sorted(order) == sorted(view.names())
    assert [name for name in order if name in before] == before
    position = {name: i for i, name in enumerate(order)}
    for name in view.names():
        for producer in view.producers(name):
            assert position[producer] < position[name]
    for cast in inserted:
        (producer,) = view.producers(cast)
        between = order[position[producer] + 1:position[cast]]
        assert all(name in inserted for name in between), (cast, between)
    view.add_node(node_def_pb2.NodeDef(name="late", op="NoOp", input=["^" + before[0]]))
    assert topological_order(view)[-1] == "late"  # edited since validation: Kahn's over the whole graph


@pytest.mark.parametrize("device, gpu", [
    ("", False),
    ("/job:localhost/replica:0/task:0/device:GPU:0", True),
    ("/device:CPU:0", False),
    ("/gpu:1", True),
    ("/device:XLA_GPU:0", True),
    ("/job:gpuworker/replica:0/task:0/device:CPU:0", False),  # a job's name says nothing of the device
])
def test_on_gpu_reads_the_device_part_of_a_device_string(device, gpu):
    from npu_sim_bridge.graph.names import on_gpu

    assert on_gpu(device) is gpu


def test_the_view_holds_a_lone_input_as_its_string_and_others_as_a_tuple():
    """One form per node (graph.table.held_inputs): the empty tuple for a node that reads nothing, the
    str for one input, a tuple for more; each mutator moves a node between the forms with the NodeDef."""
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="a", op="Placeholder")
    graph_def.node.add(name="b", op="Placeholder")
    graph_def.node.add(name="c", op="Identity", input=["a"])
    view = GraphView(graph_def)
    class Held:  # the form the view holds a node's inputs in
        def __getitem__(self, name):
            return view._inputs[view._at[name]]  # pylint: disable=protected-access

    held = Held()
    assert held["a"] == () and held["c"] == "a" and view.input_texts("c") == ("a",)
    view.add_input("c", "^b")
    assert held["c"] == ("a", "^b") and list(view.node("c").input) == ["a", "^b"]
    view.remove_input("c", 1)
    assert held["c"] == "a" and view.consumers("b") == []
    view.set_input("c", 0, "b")
    assert held["c"] == "b" and view.consumers("a") == [] and view.consumers("b") == ["c"]
    view.remove_input("c", 0)
    assert held["c"] == () and list(view.node("c").input) == []
    view.add_node(node_def_pb2.NodeDef(name="d", op="Identity", input=["a"]))
    view.add_node(node_def_pb2.NodeDef(name="e", op="AddV2", input=["a", "d"]))
    assert held["d"] == "a" and held["e"] == ("a", "d") and view.consumers("a") == ["d", "e"]


def test_validation_takes_each_added_or_edited_node_once_across_compact():
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Identity" input: "c" }\n'))
    assert not view.has_touched() and list(view.take_touched()) == []
    view.add_node(node_def_pb2.NodeDef(name="e", op="Identity", input=["a"]))
    view.set_input("d", 0, "e")
    view.set_input("d", 0, "a")  # edited twice: listed once
    view.set_input("c", 0, "a")
    view.remove_input("c", 0)  # removing an input alone asks for no look
    view.set_input("b", 0, "e")
    view.remove_node("c")  # touched, then removed: not listed, but the view was edited
    view.compact()  # the places move up; the marks move with them
    assert view.has_touched()
    assert list(view.take_touched()) == ["b", "d", "e"]  # the index's order
    assert not view.has_touched() and list(view.take_touched()) == []
    view.remove_node("d")
    assert not view.has_touched()  # a removal alone adds nothing to look at
    view.touch("a")
    assert list(view.take_touched()) == ["a"]


def test_validation_ranks_a_new_node_that_reads_one_added_after_it():
    """New nodes are ranked as validation meets them in the order of their places; one whose input
    came later waits for it, and a cycle among new nodes is still found."""
    view = GraphView(_graph(CHAIN))
    validate_graph(view)
    view.add_node(node_def_pb2.NodeDef(name="reader", op="Identity", input=["later"]))  # not there yet
    view.add_node(node_def_pb2.NodeDef(name="later", op="Identity", input=["a"]))
    view.set_input("c", 1, "reader")
    validate_graph(view)
    ranks = view.ranks
    assert ranks is not None and ranks["a"] < ranks["later"] < ranks["reader"] < ranks["c"]
    order = topological_order(view)
    assert order.index("later") < order.index("reader") < order.index("c")
    view.add_node(node_def_pb2.NodeDef(name="p", op="Identity", input=["q"]))
    view.add_node(node_def_pb2.NodeDef(name="q", op="Identity", input=["p"]))
    with pytest.raises(GraphValidationError, match="cycle"):
        validate_graph(view)


def test_the_view_reads_every_op_past_two_bytes_of_codes():
    """Ops are two-byte codes while a graph has up to 65,536 op types; the one past that, whether it
    comes with the graph, an added node or set_op, widens them without losing an op."""
    graph_def = graph_pb2.GraphDef()
    for index in range((1 << 16) - 1):
        graph_def.node.add(name=f"n{index}", op=f"Op{index}")
    view = GraphView(graph_def)
    view.add_node(node_def_pb2.NodeDef(name="a", op="NewA"))  # the last two-byte code
    view.add_node(node_def_pb2.NodeDef(name="b", op="NewB"))  # the first past it
    view.set_op("n1", "NewC")
    assert [view.op(name) for name in ("n0", "n1", "n2", f"n{(1 << 16) - 2}", "a", "b")] == [
        "Op0", "NewC", "Op2", f"Op{(1 << 16) - 2}", "NewA", "NewB"]
    graph_def.node.add(name="c", op="NewD")
    wide = GraphView(graph_def)  # past two bytes as it is built
    assert wide.op("c") == "NewD" and wide.op("n7") == "Op7" and wide.op("b") == "NewB"


def test_the_view_lists_consumers_per_edge_without_decoding_its_index():
    """consumers_of gives one name per edge (c reads b twice: there twice), () for none, and a name no
    node has lists its readers; consumer_edges gives every producer with a consumer, the graph's first."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Relu" input: "ghost" }'))
    assert sorted(view.consumers_of("b")) == ["c", "c"] and view.consumers_of("d") == ()
    assert list(view.consumers_of("ghost")) == ["d"] and view.consumers("b") == ["c"]
    listed = [(name, sorted(users)) for name, users in view.consumer_edges()]
    assert listed == [("a", ["b", "c"]), ("b", ["c", "c"]), ("ghost", ["d"])]
    view.set_input("c", 0, "a")
    assert list(view.consumers_of("b")) == ["c"] and sorted(view.consumers_of("a")) == ["b", "c", "c"]


def test_ops_of_reads_the_ops_op_reads_across_edits_and_compaction():
    """ops_of gives, in one list, what op gives for each name: after set_op, an added node and a
    compaction that moves the places; a name no node has is refused."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Relu" input: "c:0" }'))
    view.set_op("b", "Tanh")
    view.add_node(node_def_pb2.NodeDef(name="e", op="Neg", input=["d"]))
    view.set_input("e", 0, "c")
    view.remove_node("d")
    view.compact()
    names = ["e", "a", "c", "b"]
    assert view.ops_of(names) == [view.op(name) for name in names] == ["Neg", "Placeholder", "AddV2", "Tanh"]
    assert view.ops_of(iter(names[:2])) == ["Neg", "Placeholder"]
    with pytest.raises(KeyError):
        view.ops_of(["d"])


def test_names_with_op_in_lists_the_live_nodes_of_the_ops_in_graph_order():
    """What passes read instead of every NodeDef: an op set after the view was built counts, a removed
    node does not (compacted or not), an added one comes in GraphDef order."""
    view = GraphView(_graph(CHAIN + 'node { name: "d" op: "Relu" input: "c:0" }'))
    assert view.names_with_op_in({"AddV2", "Relu"}) == ["b", "c", "d"]
    view.set_op("a", "Relu")
    view.add_node(node_def_pb2.NodeDef(name="e", op="Relu", input=["d"]))
    view.set_input("d", 0, "b")
    view.remove_node("c")
    assert view.names_with_op_in({"AddV2", "Relu"}) == ["a", "b", "d", "e"]
    view.compact()
    assert view.names_with_op_in(frozenset({"Relu"})) == ["a", "b", "d", "e"] and view.names_with_op_in(()) == []


def test_names_with_op_in_reads_a_widened_op_column():
    """Past 65,536 op types the op column widens to four bytes a code: the search reads it as such (the
    op a node had first, the one it has now, and an op no node has)."""
    view = GraphView(_graph(CHAIN))
    for number in range(1 << 16):
        view.set_op("a", f"Op{number}")
    assert view._op_codes.itemsize == 4  # the widened column, not a two-byte one
    assert view.names_with_op_in({"Op65535", "Relu", "NoSuchOp"}) == ["a", "b"]
    assert view.names_with_op_in({"Op0"}) == []


def test_never_had_ops_says_whether_any_node_ever_had_one_of_the_ops():
    """A graph without any node of the ops is told apart (a pass looking for them skips it); a node
    added or given the op later counts, and so does one removed since (the answer stays on the safe side)."""
    view = GraphView(_graph(CHAIN))
    assert view.never_had_ops({"VariableV2", "Variable"}) and not view.never_had_ops({"Relu", "Variable"})
    view.add_node(node_def_pb2.NodeDef(name="v", op="VariableV2"))
    assert not view.never_had_ops({"VariableV2"})
    view.set_op("b", "Variable")
    assert not view.never_had_ops({"Variable"})
    view.remove_node("v")
    view.compact()
    assert not view.never_had_ops({"VariableV2"})
