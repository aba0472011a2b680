"""Function bodies alike but for names are decided once: the precision pass maps one body's rewrite onto
the others, and the result is what working out each body on its own gives."""

import collections

import tensorflow as tf
from tensorflow.core.framework import function_pb2, types_pb2

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.graph.alike import Renaming, alike_key
from npu_sim_bridge.passes import ItemInfo, run_pipeline
from npu_sim_bridge.passes.precision import pass_ as precision_pass
from npu_sim_bridge.testing import models

_v1 = tf.compat.v1


def keras_bn_training_graph():
    """Three conv + batch norm blocks of different widths behind Keras's learning phase (cond v2), then three
    dense layers of different widths inside a tf.cond, trained: each batch norm and each cond brings its own
    copies of the same branch and gradient functions (the dense branches get Casts of their arguments)."""
    with models._control_flow("v2"), models._building(0) as graph:
        images = _v1.placeholder(tf.float32, [2, 8, 8, 3], name="images")
        labels = _v1.placeholder(tf.int32, [2], name="labels")
        x = images
        for index, width in enumerate((4, 8, 16)):
            x = tf.keras.layers.Conv2D(width, 3, padding="same", name=f"conv{index}")(x)
            bn = tf.keras.layers.BatchNormalization(name=f"bn{index}")
            x = tf.nn.relu(bn(x))
        h = tf.keras.layers.GlobalAveragePooling2D()(x)
        flag = _v1.placeholder_with_default(True, [], name="flag")
        for index, width in enumerate((8, 12, 6)):
            w = _v1.get_variable(f"dense{index}", [h.shape[-1], width], use_resource=True)
            h = tf.cond(flag, lambda h=h, w=w: tf.nn.relu(tf.matmul(h, w)), lambda h=h, w=w: tf.matmul(h, w) * 0.5)
        logits = tf.keras.layers.Dense(5, name="logits")(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
                              name="loss")
        train_op = _v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss, name="train")
    return graph.as_graph_def(), ["loss", train_op.name]


def keras_bn_training_meta_graph():
    """The same graph as Grappler gets it from a Session (it adds shapes to every function it hands over)."""
    graph_def, fetch = keras_bn_training_graph()
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        meta = _v1.train.export_meta_graph(graph=graph)
    meta.collection_def["train_op"].node_list.value.extend(fetch)
    return meta


def rewrite(graph_def, fetch):
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": "precision"})
    return run_pipeline(graph_def, options, ItemInfo(id="alike", fetch=tuple(fetch)))


def records(report):
    return {name: (r.op, r.list, r.dtype_before, r.dtype_after, r.reason)
            for name, r in report.nodes.items()}


def library(graph_def):
    return {f.signature.name: f.SerializeToString(deterministic=True) for f in graph_def.library.function}


def test_alike_bodies_are_rewritten_as_if_each_were_worked_out_on_its_own(monkeypatch):
    graph_def, fetch = keras_bn_training_graph()
    functions = list(graph_def.library.function)
    groups = collections.Counter(alike_key(f) for f in functions)
    assert max(groups.values()) >= 3, "the three batch norms should bring alike bodies"

    shared = rewrite(graph_def, fetch)
    # Each body a key of its own: every body is worked out on its own.
    monkeypatch.setattr(precision_pass, "alike_key", lambda fdef, *context, body=None: fdef.signature.name.encode())
    alone = rewrite(graph_def, fetch)

    assert library(shared.graph_def) == library(alone.graph_def)
    assert [n.SerializeToString(deterministic=True) for n in shared.graph_def.node] == \
        [n.SerializeToString(deterministic=True) for n in alone.graph_def.node]
    assert records(shared.report) == records(alone.report)
    args = {f.signature.name: {arg.name for arg in f.signature.input_arg} for f in graph_def.library.function}
    of_args = [(name.split("/")[1], text) for name, (*_, text) in records(shared.report).items()
               if "NpuSim" in name and name.split("/")[0] in args and name.split("/")[1] in args[name.split("/")[0]]]
    assert len(of_args) >= 3 and all(text.endswith(f" of {arg}") for arg, text in of_args)
    casts = [node.name for f in shared.graph_def.library.function for node in f.node_def
             if node.name.split("/")[0] in {arg.name for arg in f.signature.input_arg} and "NpuSim" in node.name]
    assert len(casts) >= 3, "the dense branches should round their arguments"
    stats = [next(p.stats for p in result.report.passes if p.name == "precision") for result in (shared, alone)]
    assert stats[0] == stats[1] and stats[0]["function_bodies"] >= len(groups) + 3


def test_alike_bodies_are_shared_in_the_graph_grappler_hands_over(monkeypatch):
    from tensorflow.python.grappler import tf_optimizer

    from npu_sim_bridge.testing.grappler import npu_only_config

    config = npu_only_config({"precision_mode": "allow_mix_precision", "sim_passes": "precision"})
    meta = keras_bn_training_meta_graph()
    handed = {f.signature.name: f for f in meta.graph_def.library.function}
    worked_out = []
    work = precision_pass.PrecisionPass._function
    monkeypatch.setattr(precision_pass.PrecisionPass, "_function",
                        staticmethod(lambda fdef, *rest: worked_out.append(fdef.signature.name) or work(fdef, *rest)))
    shared = tf_optimizer.OptimizeGraph(config, meta)
    shared_work = len(worked_out)
    monkeypatch.setattr(precision_pass, "alike_key", lambda fdef, *context, body=None: fdef.signature.name.encode())
    alone = tf_optimizer.OptimizeGraph(config, meta)
    assert library(shared) == library(alone)
    assert 0 < shared_work <= (len(worked_out) - shared_work) / 2, "alike bodies should be worked out once"
    rounded = [f.signature.name for f in shared.library.function
               if any("NpuSim" in node.name for node in f.node_def) and f.signature.name in handed]
    assert len(rounded) >= 6, "the dense branches and their gradients should get round trips"


def _function(name, args, shape_size, extra_node=None):
    fdef = function_pb2.FunctionDef()
    fdef.signature.name = name
    for arg in args:
        fdef.signature.input_arg.add(name=arg, type=types_pb2.DT_FLOAT)
    fdef.signature.output_arg.add(name="out", type=types_pb2.DT_FLOAT)
    fdef.arg_attr[0].attr["_user_specified_name"].s = args[0].encode()
    node = fdef.node_def.add(name="exp", op="Exp", input=[args[0]])
    node.attr["T"].type = types_pb2.DT_FLOAT
    node.attr["_output_shapes"].list.shape.add().dim.add(size=shape_size)
    if extra_node:
        fdef.node_def.add(name=extra_node, op="NoOp")
    fdef.ret["out"] = "exp:y:0"
    return fdef


def test_alike_key_ignores_names_and_shapes_and_nothing_else():
    one, two = _function("f_1", ["a"], 4), _function("f_2", ["b"], 16)
    assert alike_key(one) == alike_key(two)
    assert alike_key(one, True) != alike_key(two, False)
    one.attr["_input_shapes"].list.shape.add().dim.add(size=4)  # what Grappler records on an item's function
    two.attr["_input_shapes"].list.shape.add().dim.add(size=16)
    one.signature.input_arg[0].handle_data.add(dtype=types_pb2.DT_FLOAT).shape.dim.add(size=4)
    assert alike_key(one) == alike_key(two)
    other_op = _function("f_3", ["c"], 4)
    other_op.node_def[0].op = "Log"
    assert alike_key(other_op) != alike_key(one)
    other_dtype = _function("f_4", ["d"], 4)
    other_dtype.node_def[0].attr["T"].type = types_pb2.DT_HALF
    assert alike_key(other_dtype) != alike_key(one)


def test_renaming_gives_the_member_its_names_and_shapes():
    template, member = _function("f_1", ["a"], 4), _function("f_2", ["b"], 16)
    template.attr["_input_shapes"].list.shape.add().dim.add(size=4)  # the member has none recorded
    rewritten = function_pb2.FunctionDef()
    rewritten.CopyFrom(template)
    cast = rewritten.node_def.add(name="a/NpuSimCast_0_float16", op="Cast", input=["a"])
    rewritten.node_def[0].input[0] = "a/NpuSimCast_0_float16"
    rename = Renaming(["a"], member, {cast.name: "a"})
    result = rename.function(rewritten)
    assert result.signature == member.signature and result.arg_attr == member.arg_attr
    assert result.attr == member.attr
    nodes = {node.name: node for node in result.node_def}
    assert nodes["b/NpuSimCast_0_float16"].input == ["b"]
    assert nodes["exp"].input == ["b/NpuSimCast_0_float16"]
    assert nodes["exp"].attr["_output_shapes"].list.shape[0].dim[0].size == 16
    assert rename("a") == "b" and rename("exp") == "exp"


def test_renaming_declines_a_name_the_member_already_uses():
    template = _function("f_1", ["a"], 4, extra_node="b/NpuSimCast_0_float16")
    member = _function("f_2", ["b"], 4, extra_node="b/NpuSimCast_0_float16")
    rewritten = function_pb2.FunctionDef()
    rewritten.CopyFrom(template)
    rewritten.node_def.add(name="a/NpuSimCast_0_float16", op="Cast", input=["a"])
    assert Renaming(["a"], member, {"a/NpuSimCast_0_float16": "a"}).function(rewritten) is None
