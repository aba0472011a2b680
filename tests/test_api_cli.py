"""The offline API and the npu-sim CLI on graphs saved the ways users save them."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.graph.io import GraphInputError

REPORT_NODE_FIELDS = {"name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason",
                      "reasons"}


def _train_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        logits = tf.compat.v1.layers.dense(x, 3, name="dense")
        loss = tf.reduce_mean(tf.square(logits), name="loss")
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf.compat.v1.add_to_collection("train_op", train)
    return graph


def test_rewrite_accepts_graph_def_meta_graph_and_tf_graph():
    graph = _train_graph()
    meta = tf.compat.v1.train.export_meta_graph(graph=graph)
    for source in (graph.as_graph_def(), meta, graph):
        graph_def, report = npu_sim_bridge.rewrite(source, {"precision_mode": "allow_mix_precision"},
                                                   fetches=["loss:0", "train"])
        with tf.Graph().as_default():
            tf.graph_util.import_graph_def(graph_def, name="")  # a valid, importable graph
        assert {"loss", "train"} <= {node.name for node in graph_def.node}
        data = json.loads(report.to_json())
        assert set(data) >= {"options", "warnings", "summary", "nodes"}
        assert data["options"]["precision_mode"] == "allow_mix_precision"
        assert all(set(node) == REPORT_NODE_FIELDS for node in data["nodes"])
        assert "dense/MatMul" in {node["name"] for node in data["nodes"]}


def test_rewrite_accepts_a_config_proto(npu_config):
    graph_def, report = npu_sim_bridge.rewrite(
        _train_graph().as_graph_def(), npu_config(precision_mode="force_fp16"))
    assert report.options["precision_mode"] == "force_fp16"


def test_rewrite_rejects_bad_options_with_the_key():
    with pytest.raises(npu_sim_bridge.ConfigError, match="option precision_mode value 'fp17'"):
        npu_sim_bridge.rewrite(_train_graph().as_graph_def(), {"precision_mode": "fp17"})


def test_rewrite_reads_saved_model_directory(tmp_path):
    graph = _train_graph()
    export = tmp_path / "saved"
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        builder = tf.compat.v1.saved_model.Builder(str(export))
        signature = tf.compat.v1.saved_model.predict_signature_def(
            inputs={"x": graph.get_tensor_by_name("x:0")},
            outputs={"loss": graph.get_tensor_by_name("loss:0")})
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": signature})
        builder.save()
    graph_def, report = npu_sim_bridge.rewrite(str(export))
    assert "loss" in {n.name for n in graph_def.node}
    assert report.summary["nodes_before"] > 0


def test_rewrite_names_unreadable_inputs(tmp_path):
    missing = tmp_path / "missing.pb"
    with pytest.raises(GraphInputError, match="does not exist"):
        npu_sim_bridge.rewrite(str(missing))
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\xff\xfe not a graph")
    with pytest.raises(GraphInputError, match="neither a GraphDef nor a MetaGraphDef"):
        npu_sim_bridge.rewrite(str(junk))
    with pytest.raises(GraphInputError, match="cannot read a graph from a int"):
        npu_sim_bridge.rewrite(42)


def _write_graph(tmp_path, as_text=False):
    name = "model.pbtxt" if as_text else "model.pb"
    tf.io.write_graph(_train_graph().as_graph_def(), str(tmp_path), name, as_text=as_text)
    return str(tmp_path / name)


def test_cli_inspect_prints_the_text_report(tmp_path, capsys):
    path = _write_graph(tmp_path)
    assert cli_main(["inspect", path, "--param", "precision_mode=allow_mix_precision"]) == 0
    out = capsys.readouterr().out
    assert "NpuOptimizer report" in out and "option precision_mode = 'allow_mix_precision'" in out


def test_cli_inspect_json_is_the_report_contract(tmp_path, capsys):
    path = _write_graph(tmp_path, as_text=True)
    assert cli_main(["inspect", path, "--json", "--param", "mix_compile_mode=true"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["options"]["mix_compile_mode"] is True
    assert all(set(node) == REPORT_NODE_FIELDS for node in data["nodes"])


def test_cli_reports_bad_params_without_a_traceback(tmp_path, capsys):
    path = _write_graph(tmp_path)
    assert cli_main(["inspect", path, "--param", "precision_mode=fp17"]) == 1
    err = capsys.readouterr().err
    assert "precision_mode" in err and "fp17" in err and "Traceback" not in err


def test_cli_rewrite_writes_a_loadable_graph(tmp_path):
    path = _write_graph(tmp_path)
    out = tmp_path / "out.pb"
    report = tmp_path / "report.json"
    assert cli_main(["rewrite", path, "-o", str(out), "--report", str(report)]) == 0
    graph_def = tf.compat.v1.GraphDef.FromString(out.read_bytes())
    with tf.Graph().as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    assert json.loads(report.read_text())["summary"]["nodes_after"] == len(graph_def.node)


def test_npu_sim_console_script_runs(tmp_path):
    path = _write_graph(tmp_path)
    script = os.path.join(os.path.dirname(sys.executable), "npu-sim")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "npu_sim_bridge"]
    completed = subprocess.run(command + ["inspect", path, "--json"], capture_output=True,
                               text=True, check=False, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["summary"]["nodes_before"] > 0
