"""npu-sim compare: metrics, matching, first divergent op, outputs, bad input; seed 004's workflow end to end."""

import csv
import json
import os
import runpy
import tempfile

import numpy as np
import pytest

from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.dumps import DumpMismatchError, compare_dumps
from npu_sim_bridge.dumps.compare import metrics
from npu_sim_bridge.passes.dump import layout

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "fusion_debugging.py")


def make_dump(folder, nodes, tensors, steps=(0,)):
    """A graph dump on disk: nodes {name: op} of the source graph, tensors {op: (type, array per step)}."""
    entries = []
    for order, (op, (op_type, values)) in enumerate(tensors.items()):
        entry = {"op": op, "type": op_type, "order": order, "io": "output", "slot": 0, "dtype": "float32",
                 "file": layout.stem(order, "output", 0) + ".npy", "fusion": [], "fused_from": []}
        if op_type.startswith("_Fused"):
            entry.update(fusion=["MatMulBiasAddFusionPass"], fused_from=["mm", op])
        entries.append(entry)
        for step in steps:
            path = os.path.join(folder, layout.DUMP_DIR, f"step_{step}")
            os.makedirs(path, exist_ok=True)
            np.save(os.path.join(path, entry["file"]), values[step] if isinstance(values, dict) else values)
    layout.write_manifest(folder, {"format": layout.FORMAT, "graph_id": os.path.basename(folder),
                                   "source_graph": {"fingerprint": str(sorted(nodes.items())), "nodes": nodes},
                                   "tensors": entries, "overflow": {}})
    return folder


NODES = {"x": "Placeholder", "mm": "MatMul", "bias": "BiasAdd", "relu": "Relu"}


def test_metrics_cosine_and_errors():
    a = np.array([1.0, 2.0, -3.0])
    assert metrics(a, a) == (1.0, 0.0, 0.0, False)
    cosine, max_abs, max_rel, nonfinite = metrics(a, a * 1.01)
    assert cosine == pytest.approx(1.0) and max_abs == pytest.approx(0.03) and max_rel == pytest.approx(0.01)
    assert metrics(np.zeros(3), np.zeros(3))[0] == 1.0 and metrics(np.zeros(3), a)[0] == 0.0
    assert metrics(np.array([1.0, np.inf]), np.array([1.0, 5.0]))[3] is True
    assert metrics(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))[3] is False
    assert metrics(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))[1:3] == (0.0, 0.0)


def test_metrics_nonfinite_against_finite_is_an_infinite_error():
    for a, b in (([np.nan, 1.0], [2.0, 1.0]), ([1.0, np.inf], [1.0, 5.0]), ([np.nan], [3.0])):
        _, max_abs, max_rel, nonfinite = metrics(np.array(a), np.array(b))
        assert nonfinite is True and max_abs == np.inf and max_rel == np.inf, (a, b)


def test_first_divergent_op_in_graph_order(tmp_path):
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = make_dump(str(tmp_path / "a"), NODES, {"mm": ("MatMul", base), "bias": ("BiasAdd", base + 1),
                                               "relu": ("Relu", base + 1)})
    b = make_dump(str(tmp_path / "b"), NODES, {"bias": ("_FusedMatMul", base + 1.5), "relu": ("Relu", base + 2)})
    result = compare_dumps(a, b)
    pair, row = result.first_divergent
    assert (row.op, row.type_b, row.order) == ("bias", "_FusedMatMul", 1)
    assert "MatMulBiasAddFusionPass" in row.fusion
    statuses = {r.op: r.status for r in result.rows}
    assert statuses == {"mm": "only in A", "bias": "DIVERGED", "relu": "DIVERGED"}
    assert compare_dumps(a, b, atol=0.75).first_divergent[1].op == "relu"


def test_dumps_of_different_graphs_are_refused_with_what_differs(tmp_path):
    a = make_dump(str(tmp_path / "a"), NODES, {"mm": ("MatMul", np.ones(3))})
    other = dict(NODES, conv="Conv2D", relu="Relu6")
    del other["bias"]
    b = make_dump(str(tmp_path / "b"), other, {"mm": ("MatMul", np.ones(3))})
    with pytest.raises(DumpMismatchError) as caught:
        compare_dumps(a, b)
    message = str(caught.value)
    assert "different graphs" in message and "only in A: bias (BiasAdd)" in message
    assert "only in B: conv (Conv2D)" in message and "relu (Relu -> Relu6)" in message


def test_missing_or_empty_dump_folders_say_what_to_do(tmp_path, capsys):
    assert cli_main(["compare", str(tmp_path / "nope"), str(tmp_path)]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert cli_main(["compare", str(tmp_path), str(tmp_path)]) == 1
    assert "no manifest.json was found" in capsys.readouterr().err


def test_cli_compare_table_csv_json_and_progress(tmp_path, capsys):
    values = {step: np.full(4, step, np.float32) for step in (0, 1)}
    a = make_dump(str(tmp_path / "a"), NODES, {"mm": ("MatMul", values), "bias": ("BiasAdd", values)}, (0, 1))
    changed = {0: values[0], 1: values[1] + 0.5}
    b = make_dump(str(tmp_path / "b"), NODES, {"mm": ("MatMul", values), "bias": ("BiasAdd", changed)}, (0, 1))
    out_csv = str(tmp_path / "rows.csv")
    assert cli_main(["compare", a, b, "--out", out_csv, "--progress", "--progress-min", "1"]) == 0
    captured = capsys.readouterr()
    assert "cosine" in captured.out and "DIVERGED" in captured.out
    assert "first divergent op: bias (BiasAdd) output 0 at step 1, graph order 1" in captured.out
    assert "4/4 tensors" in captured.err                                      # the progress bar
    rows = list(csv.DictReader(open(out_csv)))
    assert len(rows) == 4 and {r["status"] for r in rows} == {"match", "DIVERGED"}
    out_json = str(tmp_path / "rows.json")
    assert cli_main(["compare", a, b, "--out", out_json, "--quiet"]) == 0
    data = json.load(open(out_json))
    assert data["first_divergent"]["op"] == "bias" and data["first_divergent"]["step"] == 1
    assert cli_main(["compare", a, b, "--out", str(tmp_path / "rows.txt")]) == 2  # a usage error
    assert "must end in .csv or .json" in capsys.readouterr().err


@pytest.mark.parametrize("hand_built", [False, True], ids=["npu_config_proto", "hand_built_config"])
def test_seed_004_workflow_end_to_end(monkeypatch, hand_built):
    """Fusion on vs off, dump both, compare, find the fused op, switch off just its rule, divergence gone.

    hand_built: the ConfigProto as seeds 000 and 004 build it, Grappler's remapper left on."""
    workdir = tempfile.mkdtemp(prefix="npu_sim_seed004_")
    monkeypatch.setenv("NPU_SIM_PRECISION_DATA_DIR", os.path.join(workdir, "precision_data"))
    example = runpy.run_path(EXAMPLE, run_name="fusion_debugging")
    found, after = example["main"](workdir, hand_built=hand_built)
    pair, row = found.first_divergent
    assert row.type_b == "_FusedMatMul" and "MatMulBiasAddFusionPass" in row.fusion
    assert row.op == "hidden/Relu"
    assert after.first_divergent is None and after.pairs and all(p.rows for p in after.pairs)
