"""The pipeline writes nothing; the publishing step at the boundary writes the report files, the history and the
DUMP_GE_GRAPH files."""

import os

import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.config import from_dict
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.passes import ItemInfo, run_pipeline
from npu_sim_bridge.report import publish

v1 = tf.compat.v1


def _graph_def():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2, 3], name="x")
        w = tf.constant([[1.0], [2.0], [3.0]], name="w")
        tf.nn.relu(tf.matmul(x, w, name="mm"), name="y")
    return graph.as_graph_def()


def _files(folder):
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in os.walk(folder) for name in names)


def test_the_pipeline_writes_nothing_and_publish_writes_it_all(tmp_path, monkeypatch):
    monkeypatch.setenv("DUMP_GE_GRAPH", "1")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "1")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "dumps"))
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_report_dir": str(tmp_path / "reports")})
    npu_sim_bridge.clear_reports()
    dump = publish.dump_request()
    result = run_pipeline(_graph_def(), options, ItemInfo(id="tf_graph", fetch=("y:0",)), keep_stage=dump.wants)
    assert _files(str(tmp_path)) == [] and npu_sim_bridge.recent_reports() == []
    assert [stage for stage, _ in result.stages][:2] == ["PreRunBegin", "AfterFusion"]

    published = publish.publish(result, options, dump)
    assert npu_sim_bridge.recent_reports() == [result.report]
    base = os.path.join(str(tmp_path / "reports"), result.report.graph_id)
    assert published.report == base + ".json" and result.report.graph_id.endswith("_predict")
    for suffix in (".json", ".txt", ".html", ".before.pbtxt", ".after.pbtxt"):
        assert os.path.getsize(base + suffix) > 0
    dumps = sorted(os.path.basename(path) for path in published.dumps)
    assert dumps == _files(str(tmp_path / "dumps"))
    stages = [name.split(f"_graph_{result.report.graph_id}_")[-1][:-4] for name in dumps]
    assert stages[0] == "PreRunBegin" and "PreRunAfterBuild" in stages and "AfterPrecision" in stages
    assert any(name.endswith("_Build.txt") for name in dumps), "each GeOp's body is dumped too"


def test_an_unwritable_report_dir_is_one_line_naming_the_option(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    options = from_dict({"sim_report_dir": str(blocker)})
    result = run_pipeline(_graph_def(), options, ItemInfo(id="tf_graph", fetch=("y:0",)))
    with pytest.raises(ConfigError) as caught:
        publish.publish(result, options)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"option sim_report_dir {str(blocker)!r}: cannot write")
    assert message.endswith("point it at a writable directory")
