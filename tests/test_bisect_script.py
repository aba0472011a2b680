"""npu-sim bisect --script on a TF1 training script (child processes, as `npu-sim run` runs scripts)."""

import argparse
import json
import os
import tempfile

import numpy as np
import pytest

from npu_sim_bridge.bisect import BisectError, bisect_script
from npu_sim_bridge.bisect.output import customize_path
from npu_sim_bridge.bisect.script_target import ScriptTarget
from npu_sim_bridge.cli.bisect_command import _split_script_args
from npu_sim_bridge.cli.main import main as cli_main

SCRIPT = os.path.join(os.path.dirname(__file__), "bisect_scripts", "train_overflow.py")
METRIC = r"loss = (\S+)"


def test_cli_bisect_script_finds_the_culprit_and_the_fix_trains_finite(tmp_path, capsys, monkeypatch):
    mixlist, report = str(tmp_path / "mixlist.json"), str(tmp_path / "report.json")
    assert cli_main(["bisect", "--script", SCRIPT, "--metric", METRIC, "--steps", "3", "-o", mixlist,
                     "--report", report, "--workdir", str(tmp_path / "runs"), "--script-args", "--steps", "4"]) == 0
    captured = capsys.readouterr()
    assert "run 1: the float32 reference" in captured.err
    data = json.load(open(report))
    assert data["fix"] == {"types": [], "nodes": ["big/MatMul"], "customize_dtypes_nodes": ["big/MatMul"]}
    assert data["error_before"] == "inf" and data["error_after"] <= 0.01
    assert "small/MatMul" in data["stayed_float16"]

    # The files as a user applies them: the script's Session with modify_mixlist and customize_dtypes.
    target = ScriptTarget(SCRIPT, ["--steps", "3"], metric=METRIC)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the run's report folder goes
    os.mkdir(tmp_path / "tmp")
    fixed = target.run({"precision_mode": "allow_mix_precision", "modify_mixlist": mixlist,
                        "customize_dtypes": customize_path(mixlist)})
    assert os.listdir(tmp_path / "tmp") == []  # the child's reports were read, then removed
    assert fixed.failure is None and np.all(np.isfinite(fixed.values[0])) and len(fixed.values[0]) == 3
    float32_losses = json.loads(open(report).read())["reference_values"]
    np.testing.assert_allclose(fixed.values[0], float32_losses[0], rtol=0.01)
    assert fixed.nodes["small/MatMul"].dtype_after == "float16"
    assert fixed.nodes["big/MatMul"].dtype_after == "float32"


@pytest.mark.parametrize("args, message", [
    (["--quiet"], "printed no line that --metric"),
    (["--broken-float32"], "float32 itself is broken"),
    (["--no-such-flag"], "the script exited with status 2"),
])
def test_script_errors_say_what_is_wrong(args, message, tmp_path):
    with pytest.raises(BisectError) as caught:
        bisect_script(SCRIPT, ["--steps", "2"] + args, metric=METRIC, progress=None, workdir=str(tmp_path))
    assert message in str(caught.value)


def test_bad_metric_and_missing_script():
    with pytest.raises(BisectError, match="not a valid regular expression"):
        ScriptTarget(SCRIPT, metric="loss = (")
    with pytest.raises(BisectError, match="does not exist"):
        ScriptTarget("no_such_script.py", metric=METRIC)


def test_script_arguments_and_bisect_options_are_told_apart():
    args = argparse.Namespace(script=["train.py", "--lr", "0.1", "--metric", "acc=(\\S+)", "--steps=4", "--script-args",
                                      "--steps", "100"], param=[], no_guide=False, metric=None, steps=None)
    _split_script_args(args)
    assert args.script == "train.py" and args.script_args == ["--lr", "0.1", "--steps", "100"]
    assert args.metric == "acc=(\\S+)" and args.steps == "4"
