"""npu-sim compare --msaccucmp: msaccucmp's result_*.csv columns and metrics beside the simulator's own output."""

import csv
import glob
import os
import subprocess
import sys

import numpy as np
import pytest
from test_compare import NODES, make_dump

from npu_sim_bridge.dumps.msaccucmp import COLUMNS, tool_metrics

HEADER = ["Index", "OpType", "NPUDump", "DataType", "Address", "GroundTruth", "DataType", "TensorIndex", "Shape",
          "CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
          "KullbackLeiblerDivergence", "StandardDeviation", "MeanAbsoluteError", "RootMeanSquareError",
          "MaxRelativeError", "MeanRelativeError", "CompareFailReason"]


def test_metrics_follow_the_tools_definitions():
    truth = np.array([1.0, 2.0, -4.0, 0.0])
    mine = np.array([1.1, 2.2, -4.4, 0.5])
    values = tool_metrics(truth, mine)
    assert float(values["MaxAbsoluteError"]) == pytest.approx(0.5, abs=1e-6)
    assert float(values["AccumulatedRelativeError"]) == pytest.approx(0.3)  # 0.1 x 3; the zero is left out
    assert float(values["MaxRelativeError"]) == pytest.approx(0.1, abs=1e-6)
    assert float(values["MeanRelativeError"]) == pytest.approx(0.1, abs=1e-6)
    assert float(values["MeanAbsoluteError"]) == pytest.approx((0.1 + 0.2 + 0.4 + 0.5) / 4, abs=1e-6)
    assert float(values["RootMeanSquareError"]) == pytest.approx(np.sqrt((0.01 + 0.04 + 0.16 + 0.25) / 4), abs=1e-6)
    assert float(values["RelativeEuclideanDistance"]) == pytest.approx(np.sqrt(0.46) / np.sqrt(21.0), abs=1e-6)
    assert values["StandardDeviation"] == f"({mine.mean():.3f};{mine.std():.3f}),({truth.mean():.3f};{truth.std():.3f})"
    same = tool_metrics(truth, truth)
    assert same["CosineSimilarity"] == "1.000000" and float(same["KullbackLeiblerDivergence"]) == pytest.approx(0.0, abs=1e-6)
    assert float(values["KullbackLeiblerDivergence"]) > 0


def test_cli_compare_writes_the_tools_result_csv_beside_its_own(tmp_path):
    base = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0
    a = make_dump(str(tmp_path / "a"), NODES, {"mm": ("MatMul", base), "bias": ("BiasAdd", base + 1),
                                               "relu": ("Relu", np.maximum(base + 1, 0))})
    b = make_dump(str(tmp_path / "b"), NODES, {"bias": ("_FusedMatMul", base + 1.5),
                                               "relu": ("Relu", np.maximum(base + 1.5, 0))})
    script = os.path.join(os.path.dirname(sys.executable), "npu-sim")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "npu_sim_bridge"]
    out = tmp_path / "msaccucmp"
    completed = subprocess.run(command + ["compare", a, b, "--msaccucmp", str(out), "--out", str(tmp_path / "own.csv")],
                               capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    (path,) = glob.glob(str(out / "result_*.csv"))
    assert f"wrote {path}" in completed.stdout and (tmp_path / "own.csv").exists()
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == HEADER == list(COLUMNS)
    by_op = {row[7]: dict(zip(HEADER, row)) for row in rows[1:]}   # keyed by TensorIndex
    assert set(by_op) == {"mm:output:0", "bias:output:0", "relu:output:0"}
    bias = by_op["bias:output:0"]
    assert (bias["OpType"], bias["NPUDump"], bias["GroundTruth"], bias["Shape"]) == ("_FusedMatMul", "bias", "bias",
                                                                                     "[2, 3]")
    assert float(bias["MaxAbsoluteError"]) == pytest.approx(0.5) and bias["CompareFailReason"] == ""
    assert bias["Address"] == "NaN" and bias["DataType"] == "float32"
    only_a = by_op["mm:output:0"]
    assert only_a["NPUDump"] == "NaN" and only_a["CosineSimilarity"] == "NaN"
    assert only_a["CompareFailReason"] == "only in A"
