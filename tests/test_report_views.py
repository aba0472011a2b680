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
from npu_sim_bridge.report import layout
from npu_sim_bridge.report.views import display_graph, picture_data


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
    assert graphs == [result.graph_def]
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
    names = {name: geop for name, _, geop in nodes}
    geop = result.report.nodes["h"].geop
    assert geop not in names and names["h"] == geop and names["x"] == ""
    assert ("x", "h", False) in edges                   # a call input reaches the body node that reads it
    assert ("h", "host_log", False) in edges or any(src == "h" and names.get(dst) == "" for src, dst, _ in edges)


def test_layered_layout_orders_layers_breaks_cycles_and_wraps_wide_layers():
    layer, position = layout.layered_layout(4, [(0, 1), (1, 2), (2, 3), (3, 1)])
    assert layer[0] < layer[1] < layer[2] < layer[3]
    sources = list(range(1, 101))
    layer, position = layout.layered_layout(102, [(s, 101) for s in sources] + [(0, 101)])
    xs, ys = layout.grid_coordinates(layer, position)
    columns = {xs[s] for s in sources}
    assert len(columns) >= 100 // layout.MAX_COLUMN and max(xs) > 0


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
    assert all(isinstance(node["x"], float) and isinstance(node["y"], float) for node in data["nodes"])
