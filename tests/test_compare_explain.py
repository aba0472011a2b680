"""npu-sim compare: --json, --fail-on-divergence, unseeded random ops skipped as first divergent op, warnings about
tensors without a file; the fusion debugging example under `npu-sim run` (TF1 reference variables)."""

import json
import os
import subprocess
import sys

import numpy as np

from npu_sim_bridge.cli.debug_commands import DIVERGENCE_STATUS
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.dumps import compare_dumps
from npu_sim_bridge.passes.dump import layout

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
NODES = {"x": "Placeholder", "init": "RandomUniform", "w/read": "Identity", "mm": "MatMul"}


def write_dump(folder, values, extra=None, steps=(0,), dump_step="0", skip=()):
    """A graph dump on disk: values {op: array}; extra {op: manifest fields}; `skip` ops get no file."""
    entries = []
    for order, (op, value) in enumerate(values.items()):
        entry = dict({"op": op, "type": NODES[op], "order": order, "io": "output", "slot": 0, "dtype": "float32",
                      "file": layout.stem(order, "output", 0) + ".npy", "fusion": [], "fused_from": []},
                     **(extra or {}).get(op, {}))
        entries.append(entry)
        for step in steps:
            path = os.path.join(folder, layout.DUMP_DIR, f"step_{step}")
            os.makedirs(path, exist_ok=True)
            if op not in skip:
                np.save(os.path.join(path, entry["file"]), value)
    layout.write_manifest(folder, {"format": layout.FORMAT, "graph_id": os.path.basename(folder),
                                   "options": {"dump_step": dump_step},
                                   "dump_steps": [[int(s), int(s)] for s in dump_step.split("|")],
                                   "source_graph": {"fingerprint": "f", "nodes": NODES}, "tensors": entries,
                                   "branches": [{"id": 0, "switch": "cond/Switch", "port": 1, "geop": "g",
                                                 "frame": ""}], "overflow": {}})
    return folder


def two_runs(tmp_path, mm_b=2.0):
    """A and B: an unseeded initializer (different draws, so its variable read differs too) and a MatMul."""
    ones = np.ones(3, np.float32)
    extra = {"init": {"random": "unseeded"}, "w/read": {"variable": "w"}}
    names = {"init": "w/Initializer/random_uniform/RandomUniform"}
    a = write_dump(str(tmp_path / "a"), {"init": ones, "w/read": ones, "mm": ones * 2}, extra)
    b = write_dump(str(tmp_path / "b"), {"init": ones * 3, "w/read": ones * 3, "mm": ones * mm_b}, extra)
    for folder in (a, b):  # the initializer's name as TF1 writes it: <variable>/Initializer/...
        manifest = json.load(open(os.path.join(folder, layout.MANIFEST)))
        manifest["tensors"][0]["op"] = names["init"]
        layout.write_manifest(folder, manifest)
    return a, b


def test_unseeded_initializers_and_their_variable_reads_are_skipped_saying_why(tmp_path):
    a, b = two_runs(tmp_path, mm_b=2.5)
    result = compare_dumps(a, b)
    assert result.first_divergent[1].op == "mm"
    notes = {row.op: row.note for row in result.skipped}
    assert "without a seed" in notes["w/Initializer/random_uniform/RandomUniform"]
    assert "reads the variable w" in notes["w/read"] and "has no seed" in notes["w/read"]
    same = compare_dumps(*two_runs(tmp_path / "same", mm_b=2.0))
    assert same.first_divergent is None and len(same.skipped) == 2


def test_json_and_fail_on_divergence(tmp_path, capsys):
    a, b = two_runs(tmp_path, mm_b=2.5)
    assert cli_main(["compare", a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["first_divergent"]["op"] == "mm" and data["diverged"] == 3 and len(data["skipped"]) == 2
    assert cli_main(["compare", a, b, "--json", "--fail-on-divergence"]) == DIVERGENCE_STATUS
    capsys.readouterr()
    same = two_runs(tmp_path / "same", mm_b=2.0)
    assert cli_main(["compare", *same, "--fail-on-divergence", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "skipped as first divergent op" in out and "no divergent op besides the skipped ones" in out


def test_missing_files_are_reported_with_the_reason(tmp_path, capsys):
    ones = np.ones(3, np.float32)
    in_branch = {"mm": {"branches": [0]}}
    a = write_dump(str(tmp_path / "a"), {"x": ones, "mm": ones}, in_branch, skip=("mm",))
    b = write_dump(str(tmp_path / "b"), {"x": ones, "mm": ones}, steps=(0, 1), dump_step="0|1", skip=("x",))
    result = compare_dumps(a, b)
    statuses = {row.op: (row.status, row.note) for row in result.rows}
    assert statuses["mm"][0] == "file missing" and "branch not taken" in statuses["mm"][1]
    assert "not written: at step 0" in statuses["x"][1]
    text = "\n".join(result.warnings)
    assert "step 1 is dumped in B only, not compared: A's dump_step ('0') did not ask for it" in text
    assert "A (a) step 0: 1 of 2 tensors the manifest lists have no file (1 branch not taken)" in text
    assert ("B (b) step 0: 1 of 2 tensors the manifest lists have no file (1 not written): "
            "1 not written: at step 0") in text


def test_a_dump_whose_manifest_lists_tensors_but_no_step_was_written_is_warned_about(tmp_path, capsys):
    ones = np.ones(3, np.float32)
    write_dump(str(tmp_path / "a" / "g1"), {"x": ones})
    write_dump(str(tmp_path / "b" / "g1"), {"x": ones})
    empty = write_dump(str(tmp_path / "a" / "g2"), {"mm": ones}, steps=())
    result = compare_dumps(str(tmp_path / "a"), str(tmp_path / "b"))
    assert any(empty in line and "no step was written" in line for line in result.warnings)


def test_fusion_debugging_example_runs_under_npu_sim_run(tmp_path):
    """Under `npu-sim run` tf.compat.v1.layers makes reference variables: their reads are dumped before the
    in-place update, so the first divergent op is the fused op, not conv/kernel/read."""
    ran = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", os.path.join(ROOT, "examples",
                                                                                     "fusion_debugging.py"),
                          "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "is a _FusedMatMul made by MatMulBiasAddFusionPass" in ran.stdout, ran.stdout
    assert "first divergent op: conv/kernel/read" not in ran.stdout
    assert "no divergent op: every tensor both dumps hold matches" in ran.stdout.split("5. compare")[1]


def test_an_op_fed_by_a_skipped_op_is_not_the_first_divergent_op_either(tmp_path):
    ones = np.ones(3, np.float32)
    extra = {"init": {"random": "unseeded"}, "w/read": {"variable": "w", "inputs": ["w"]},
             "mm": {"inputs": ["x", "w/read"]}}
    a = write_dump(str(tmp_path / "a" / "train"), {"x": ones, "w/read": ones, "mm": ones * 2}, extra)
    b = write_dump(str(tmp_path / "b" / "train"), {"x": ones, "w/read": ones * 3, "mm": ones * 6}, extra)
    result = compare_dumps(a, b)
    notes = {row.op: row.note for row in result.rows}
    assert notes["w/read"] == "" and result.first_divergent[1].op == "w/read"   # no initializer seen: a real lead
    for run, value in (("a", ones), ("b", ones * 3)):   # the initializer's graph, dumped by the same runs
        folder = write_dump(str(tmp_path / run / "init"), {"init": value}, extra)
        manifest = json.load(open(os.path.join(folder, layout.MANIFEST)))
        manifest["tensors"][0]["op"] = "w/Initializer/random_uniform/RandomUniform"
        manifest["source_graph"]["fingerprint"] = "init"
        layout.write_manifest(folder, manifest)
    result = compare_dumps(str(tmp_path / "a"), str(tmp_path / "b"))
    notes = {row.op: row.note for row in result.rows}
    assert "reads the variable w" in notes["w/read"] and notes["mm"].startswith("follows w/read")
    assert result.first_divergent is None
