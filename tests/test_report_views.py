"""Report views: graphs before/after (.pbtxt), a TensorBoard run, and the standalone HTML picture."""

import glob
import json
import os
import re

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

import npu_sim_bridge
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.report.views import body_key, display_graph, picture_data


def small_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        w = tf.constant(np.ones((4, 3), np.float32))
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w, name="mm"), tf.constant([0.5, 1.0, 1.5]), name="bias"),
                       name="h")
        from npu_sim_bridge.runtime.scopes import without_npu_compile_scope

        with without_npu_compile_scope():
            host = tf.math.log(h + 1.0, name="host_log")
        tf.reduce_sum(tf.nn.softmax(host), name="out")
    return graph


def embedded_data(html):
    match = re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def test_report_dir_gets_graphs_tensorboard_run_and_picture(tmp_path):
    result = npu_sim_bridge.rewrite(small_graph().as_graph_def(),
                                    {"precision_mode": "allow_mix_precision", "mix_compile_mode": True,
                                     "sim_report_dir": str(tmp_path)},
                                    fetches=["out"])
    base = os.path.join(str(tmp_path), result.report.graph_id)
    for suffix in (".json", ".txt", ".before.pbtxt", ".after.pbtxt", ".html"):
        assert os.path.getsize(base + suffix) > 0, suffix
    after = text_format.Parse(open(base + ".after.pbtxt").read(), graph_pb2.GraphDef())
    assert after == result.graph_def
    before = text_format.Parse(open(base + ".before.pbtxt").read(), graph_pb2.GraphDef())
    assert "mm" in {node.name for node in before.node} and "mm" not in {node.name for node in after.node}

    events = glob.glob(os.path.join(str(tmp_path), "tensorboard", result.report.graph_id, "events.out.tfevents.*"))
    graphs = [graph_pb2.GraphDef.FromString(event.graph_def)
              for event in tf.compat.v1.train.summary_iterator(events[0]) if event.graph_def]
    (board,) = graphs  # the rewritten graph with GeOp bodies inlined, device and segment set for TensorBoard
    nodes = {node.name: node for node in board.node}
    geop = result.report.nodes["h"].geop
    inlined = nodes[f"{geop}/h"]
    assert inlined.op == "_FusedMatMul" and "device:NPU:0" in inlined.device
    assert inlined.attr["_npu_sim_segment"].s.decode() == geop and geop not in nodes
    assert "device:CPU:0" in nodes["host_log"].device and nodes["host_log"].attr["_npu_sim_segment"].s == b"host"
    assert f"{geop}/x/NpuSimRound_0_float16" in inlined.input   # body edges keep their scope
    readers = [node.name for node in board.node if "x" in node.input]  # the call's input reaches the body
    assert readers and all(name.startswith(f"{geop}/") for name in readers)
    assert any(text.startswith(f"{geop}/") for text in nodes["add"].input)  # and the result leaves from the body
    with tf.Graph().as_default():                      # a GraphDef TensorFlow accepts
        tf.graph_util.import_graph_def(board, name="")
    assert glob.glob(os.path.join(str(tmp_path), "tensorboard", result.report.graph_id + "_before", "events.*"))

    html = open(base + ".html").read()
    assert "<canvas" in html and "http" not in html and " src=" not in html   # standalone, no network
    data = embedded_data(html)
    nodes = {node["n"]: node for node in data["nodes"]}
    assert nodes["h"]["o"] == "_FusedMatMul" and nodes["h"]["l"] == "white" and nodes["h"]["p"] == "device"
    assert data["geops"][nodes["h"]["g"]] == result.report.nodes["h"].geop and len(data["geops"]) == 2
    assert nodes["host_log"]["p"] == "host" and "without_npu_compile_scope" in nodes["host_log"]["r"]
    softmax = next(node for node in data["nodes"] if node["o"] == "Softmax")
    assert softmax["l"] in ("white", "black", "gray") and softmax["p"] == "device"


def test_display_graph_draws_geop_bodies_in_place_of_their_calls():
    result = npu_sim_bridge.rewrite(small_graph().as_graph_def(), {"mix_compile_mode": True}, fetches=["out"])
    nodes, edges = display_graph(result.graph_def)
    geop_of = {key: geop for key, _, _, geop in nodes}
    geop = result.report.nodes["h"].geop
    assert geop not in geop_of and geop_of[body_key(geop, "h")] == geop and geop_of["x"] == ""
    assert ("x", body_key(geop, "h"), False) in edges          # a call input reaches the body node that reads it
    assert (body_key(geop, "h"), "add", False) in edges         # a GeOp output leaves from the body node


def test_the_fetched_name_twin_of_a_geop_output_is_its_own_box_not_a_self_loop():
    result = npu_sim_bridge.rewrite(small_graph().as_graph_def(), {"mix_compile_mode": True}, fetches=["out"])
    data = picture_data(result.report, result.graph_def)
    outs = [i for i, node in enumerate(data["nodes"]) if node["n"] == "out"]
    assert len(outs) == 2  # the Sum inside its GeOp, and the node that keeps the name "out" for the caller
    inside, twin = sorted(outs, key=lambda i: data["nodes"][i]["g"], reverse=True)
    assert data["nodes"][inside]["o"] == "Sum" and data["nodes"][inside]["g"] >= 0
    assert data["nodes"][twin]["g"] == -1 and "keeps the name of out" in data["nodes"][twin]["r"]
    assert [inside, twin, 0] in data["edges"]
    assert all(a != b for a, b, _ in data["edges"])


def test_picture_groups_nodes_by_name_scope_inside_their_geops():
    result = npu_sim_bridge.rewrite(small_graph().as_graph_def(), {"mix_compile_mode": True}, fetches=["out"])
    data = picture_data(result.report, result.graph_def)
    groups = data["groups"]
    geop_groups = [g for g in groups if g["g"] >= 0]
    assert sorted(g["k"] for g in geop_groups) == data["geops"] and all(g["p"] == -1 for g in geop_groups)
    softmax = next(node for node in data["nodes"] if node["o"] == "Softmax")
    scope = groups[softmax["s"]]                              # Softmax sits in its GeOp's box
    while scope["p"] >= 0:
        scope = groups[scope["p"]]
    assert scope["g"] == softmax["g"] >= 0
    host = next(node for node in data["nodes"] if node["n"] == "host_log")
    assert host["s"] == -1 and host["p"] == "host"


def test_cli_inspect_writes_the_views(tmp_path, capsys):
    path = str(tmp_path / "g.pb")
    with open(path, "wb") as handle:
        handle.write(small_graph().as_graph_def().SerializeToString())
    report_dir = str(tmp_path / "reports")
    assert cli_main(["inspect", path, "--fetch", "out", "--report-dir", report_dir]) == 0
    assert glob.glob(os.path.join(report_dir, "*.html")) and glob.glob(os.path.join(report_dir, "*.after.pbtxt"))
    data = embedded_data(open(glob.glob(os.path.join(report_dir, "*.html"))[0]).read())
    assert data["totals"]["nodes"] == len(data["nodes"]) > 5


def test_picture_of_a_cnn_training_graph():
    from npu_sim_bridge.testing import models

    model = models.small_cnn(batch_size=4)
    result = npu_sim_bridge.rewrite(model.meta_graph_def(), {"precision_mode": "allow_mix_precision"},
                                    fetches=model.fetch_names())
    data = picture_data(result.report, result.graph_def)
    lists = {node["l"] for node in data["nodes"]}
    assert {"white", "gray", "black"} <= lists
    assert {node["p"] for node in data["nodes"]} >= {"host", "device"}
    assert all(-1 <= node["s"] < len(data["groups"]) for node in data["nodes"])
