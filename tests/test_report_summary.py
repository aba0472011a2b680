"""What a run says about the NPU: graphs named by role, one summary line per rewritten graph, counts that agree
across the text report, the JSON report and the HTML picture, and `inspect` pruned to the fetches."""

import glob
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.cli.run import run_command
from npu_sim_bridge.report.summary import SUMMARY_ENV
from npu_sim_bridge.testing import counts, zoo

v1 = tf.compat.v1

_SCRIPT = """
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
    x = v1.placeholder(tf.float32, [4, 3], name="x")
    labels = v1.placeholder(tf.int32, [4], name="labels")
    w = v1.get_variable("w", [3, 2])
    logits = tf.matmul(x, w, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), name="loss")
    train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    init = v1.global_variables_initializer()
config = v1.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["precision_mode"].s = b"allow_mix_precision"
custom_op.parameter_map["sim_report_dir"].s = REPORT_DIR.encode()
feed = {x: np.ones((4, 3), np.float32), labels: np.zeros(4, np.int32)}
with v1.Session(graph=graph, config=config) as sess:
    sess.run(init)
    sess.run([loss, train], feed)
    sess.run(loss, feed)
    sess.run(logits, {x: feed[x]})
"""

_LINE = re.compile(r"^npu-sim: (\d{3,}_\w+) \((\w+): .*\): (\d+) GeOps \((\d+) ops on the NPU\), (\d+) host ops; "
                   r"(float16 (\d+) of (\d+) float ops on the NPU \(\d+%\)|no float op on the NPU); report (\S+)$")


def _script(folder):
    """The script, writing its reports into folder/reports."""
    folder.mkdir(exist_ok=True)
    path = folder / "train.py"
    path.write_text(f"REPORT_DIR = {str(folder / 'reports')!r}\n" + _SCRIPT)
    return str(path)


def _summary_lines(text):
    return [_LINE.match(line) for line in text.splitlines() if line.startswith("npu-sim: ")]


def _check_lines(lines, folder):
    """One line per rewritten graph, each role once, each pointing at its report, whose counts it gives."""
    assert all(lines), "every summary line has the documented form"
    by_role = {match.group(2): match for match in lines}
    assert sorted(by_role) == ["eval", "init", "predict", "train"] and len(lines) == 4
    for role, match in by_role.items():
        assert match.group(1).endswith("_" + role)
        report = match.group(9)
        assert report == os.path.join(str(folder / "reports"), match.group(1) + ".json")
        figures = json.loads(open(report, encoding="utf-8").read())["summary"]["counts"]
        assert [int(match.group(i)) for i in (3, 4, 5)] == [figures["geops"], figures["inside_geops"],
                                                             figures["outside_geops"]]
    train = by_role["train"]
    assert int(train.group(3)) == 1 and int(train.group(7)) > 0, "the training step's MatMul runs in float16"


def test_npu_sim_run_ends_with_one_line_per_rewritten_graph(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(SUMMARY_ENV, raising=False)
    npu_sim_bridge.clear_reports()
    assert run_command(_script(tmp_path), tf1=False) == 0
    _check_lines(_summary_lines(capsys.readouterr().err), tmp_path)


def _exec(path):
    exec(compile(open(path, encoding="utf-8").read(), path, "exec"), {})  # noqa: S102 - as `python` runs it


def test_a_plain_session_prints_the_lines_when_asked(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(SUMMARY_ENV, raising=False)
    _exec(_script(tmp_path / "quiet"))
    assert not _summary_lines(capsys.readouterr().err), "no line unless asked"
    monkeypatch.setenv(SUMMARY_ENV, "1")
    _exec(_script(tmp_path / "asked"))
    _check_lines(_summary_lines(capsys.readouterr().err), tmp_path / "asked")


def test_report_files_are_named_by_role(tmp_path):
    npu_sim_bridge.clear_reports()
    _exec(_script(tmp_path))
    files = glob.glob(str(tmp_path / "reports" / "*.json"))
    names = sorted(re.sub(r"^\d{3,}_", "", os.path.basename(path)[:-len(".json")]) for path in files)
    assert names == ["eval", "init", "predict", "train"]
    reports = [r for r in npu_sim_bridge.recent_reports() if not r.rerun]
    assert len({r.graph_id for r in reports}) == len(reports), "names stay unique"
    train = next(r for r in reports if r.role.name == "train")
    assert "ApplyGradientDescent" in train.role.why and "train" in train.role.why


@pytest.mark.parametrize("name", ["tf1_batchnorm_cnn", "user_cond_mlp"])
def test_counts_agree_across_text_json_and_picture(tmp_path, name):
    """The fast subset; benchmarks/check_counts.py runs the same check over the whole model sweep."""
    model = zoo.sweep_builders(applications=[])[name]()
    result = npu_sim_bridge.rewrite(model.meta_graph_def(), {"precision_mode": "allow_mix_precision",
                                                             "sim_report_dir": str(tmp_path)},
                                    fetches=model.fetch_names())
    assert result.report.graph_id.endswith("_train")
    assert counts.disagreements(result, str(tmp_path)) == []
    data = json.loads(open(os.path.join(str(tmp_path), result.report.graph_id + ".json"), encoding="utf-8").read())
    summary = data["summary"]["counts"]
    assert summary["geops"] >= 1 and summary["added_by_passes"] > 0
    assert all(index >= summary["input_nodes"] for index, row in enumerate(data["nodes"]) if not row["placement"])


def test_the_count_check_finds_a_figure_that_disagrees(tmp_path):
    """The check the sweep relies on fails when one form gives another figure."""
    model = zoo.sweep_builders(applications=[])["user_cond_mlp"]()
    result = npu_sim_bridge.rewrite(model.meta_graph_def(), {"sim_report_dir": str(tmp_path)},
                                    fetches=model.fetch_names())
    text_path = os.path.join(str(tmp_path), result.report.graph_id + ".txt")
    text = open(text_path, encoding="utf-8").read()
    placed = re.search(r"records by placement: device (\d+)", text)
    assert placed and counts.disagreements(result, str(tmp_path)) == []
    with open(text_path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(f"device {placed.group(1)}", f"device {int(placed.group(1)) + 1}", 1))
    assert any("placements" in problem for problem in counts.disagreements(result, str(tmp_path)))
    with open(text_path, "w", encoding="utf-8") as handle:  # records without a placement the text leaves out
        handle.write(re.sub(r"(records by placement: [^\n(]*?)( \(\d+ records without one[^)\n]*\))?$",
                            r"\1 (7 records without one: nodes the passes added)", text, count=1, flags=re.M))
    assert any("without a placement" in problem for problem in counts.disagreements(result, str(tmp_path)))


def test_inspect_of_a_meta_graph_leaves_the_initializers_out(tmp_path, capsys):
    model = zoo.tf1_batchnorm_cnn()
    path = str(tmp_path / "model.meta")
    with open(path, "wb") as handle:
        handle.write(model.meta_graph_def().SerializeToString())
    assert cli_main(["inspect", path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["role"] == "train"
    ops = {row["op"] for row in data["nodes"]}
    assert not ops & {"Assign", "AssignVariableOp"}, "the initializers are no part of the training step"
    assert any("pruned to the fetches" in text for text in data["warnings"])
    host = next(text for text in data["warnings"] if "stay on the host" in text)
    assert not re.search(r"\b(Assign|AssignVariableOp|StatelessRandomUniformV2)\b", host), host
    whole = npu_sim_bridge.rewrite(model.meta_graph_def())  # the offline API keeps the whole graph
    assert {"Assign", "AssignVariableOp"} & {node.op for node in whole.graph_def.node}
