"""The bad-input table (bad_inputs.json): every row through its user route, with the class and message it must give.

A row: id, route (api, session, npurunconfig, estimator, cli, process), input, expect (clear-error,
warning, ok), fragment (a piece of the message), source (audit, existing, registry), and optional
checks (exit status, text that must be absent, outputs that must stay fetchable, files a failure
must leave alone). What must never come out of any row: a traceback, an abort (a process killed by
a signal), a hang (a Session run or process past its time limit) or a Session that ran without
being rewritten. `python tests/test_bad_inputs.py` prints the counts per class and route.
"""

import collections
import glob
import json
import os
import stat
import sys

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bad_input_routes as routes  # noqa: E402
from bad_input_materials import make_materials  # noqa: E402
from npu_sim_bridge.config import from_config_proto  # noqa: E402

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_inputs.json")
ROUTES = ("api", "session", "npurunconfig", "estimator", "cli", "process")
CLASSES = ("clear-error", "warning", "ok")

with open(TABLE, encoding="utf-8") as _handle:
    ROWS = json.load(_handle)


@pytest.fixture(scope="module", name="materials")
def materials_fixture(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("bad_input_materials"))
    make_materials(folder)
    return folder


def test_the_table_is_well_formed():
    ids = [row["id"] for row in ROWS]
    assert len(ROWS) >= 150 and len(set(ids)) == len(ids)
    assert {row["route"] for row in ROWS} == set(ROUTES)
    assert all(row["expect"] in CLASSES and isinstance(row["fragment"], str) for row in ROWS)
    assert all(row["fragment"] for row in ROWS if row["expect"] != "ok")


def _run(row, places, monkeypatch):
    defaults = {"graph": "{m}/graph.pb"} if row["route"] == "api" else {}
    inp = routes.fill({**defaults, **row["input"]}, places)
    for path, content in inp.get("files", {}).items():
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
    previous = inp.get("previous")
    if previous:
        with open(previous["path"], "w", encoding="utf-8") as handle:
            handle.write(previous["content"])
    route = row["route"]
    if route == "cli":
        outcome = routes.run_cli(inp, monkeypatch, row)
    elif route == "process":
        outcome = routes.run_process(inp, places)
    else:
        outcome = getattr(routes, f"run_{route}")(inp, monkeypatch)
    return inp, outcome


def _check_extras(row, inp, outcome, places):
    checks = routes.fill({key: value for key, value in row.items()
                          if key not in ("id", "route", "input", "expect", "fragment", "source")}, places)
    if "status" in checks:
        assert outcome.status == checks["status"], outcome.message
    if "absent" in checks:
        assert checks["absent"] not in outcome.message
    if "present" in checks:
        assert checks["present"] in outcome.message
    if checks.get("json"):
        error = routes.json_error(outcome.result or "")
        assert error is not None and row["fragment"] in error["message"], outcome.message
        assert error["exit_status"] == outcome.status
    if "previous" in inp:  # a failed write leaves what the user had
        with open(inp["previous"]["path"], encoding="utf-8") as handle:
            assert handle.read() == inp["previous"]["content"]
    for tensor in checks.get("fetchable", []):  # every output keeps its name
        _assert_fetchable(outcome.result, tensor)
    if "fetchable_file" in checks:
        graph_def = tf.compat.v1.GraphDef()
        with open(checks["fetchable_file"]["path"], "rb") as handle:
            graph_def.ParseFromString(handle.read())
        for tensor in checks["fetchable_file"]["tensors"]:
            _assert_fetchable(graph_def, tensor)
    if "files_in" in checks:  # reports in a reused folder are all kept
        spec = checks["files_in"]
        names = [name for name in os.listdir(spec["folder"]) if name.endswith(spec["suffix"])]
        assert len(names) == spec["count"], names
        assert all(os.path.getsize(os.path.join(spec["folder"], name)) > 0 for name in names)
    if "no_empty_files" in checks:
        assert routes.leftovers(checks["no_empty_files"], empty_only=True) == []
    if "no_partial_files" in checks:
        assert routes.leftovers(checks["no_partial_files"], empty_only=False) == []
    if "whole_npy" in checks:  # every dump file there is whole: numpy reads it
        for path in glob.glob(os.path.join(checks["whole_npy"], "**", "*.npy"), recursive=True):
            np.load(path)
    if checks.get("one_line_error"):  # the error is the line naming the file, nothing of TensorFlow's after it
        after = outcome.message[outcome.message.index(row["fragment"]):].splitlines()
        assert "[[" not in "\n".join(after) and "Original stack trace" not in "\n".join(after), after
    if "no_checkpoint" in checks:  # a failed rewrite trains and saves nothing
        folder = checks["no_checkpoint"]
        assert not [name for name in (os.listdir(folder) if os.path.isdir(folder) else []) if name.startswith("model.ckpt")]
    if "private_dirs" in checks:
        mode = stat.S_IMODE(os.stat(checks["private_dirs"]).st_mode)
        assert mode == 0o700, oct(mode)
    for key, value in checks.get("effective", {}).items():
        assert from_config_proto(outcome.result.npu_session_config())[key] == value
    for key, value in checks.get("attributes", {}).items():
        assert getattr(outcome.result, key) == value


def _assert_fetchable(graph_def, tensor):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
        assert graph.get_tensor_by_name(tensor) is not None


def classify(row, outcome):
    """The class the outcome shows: one of CLASSES, or what went wrong (traceback, abort, hang, unrewritten)."""
    if outcome.kind in ("traceback", "abort", "hang", "unrewritten"):
        return outcome.kind
    if outcome.kind == "error":
        return "clear-error"
    said = "\n".join(outcome.warnings)
    return "warning" if row["expect"] == "warning" and row["fragment"] in said else "ok"


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_bad_input(row, materials, tmp_path, monkeypatch):
    places = {"m": materials, "tmp": str(tmp_path),
              "npu_sim": os.path.join(os.path.dirname(sys.executable), "npu-sim")}
    inp, outcome = _run(row, places, monkeypatch)
    got = classify(row, outcome)
    assert got == row["expect"], f"{got}: {outcome.message[-3000:]}"
    if row["expect"] == "clear-error":
        assert row["fragment"] in outcome.message, outcome.message[-3000:]
    elif row["expect"] == "ok" and row["fragment"]:
        assert row["fragment"] in outcome.message + "\n".join(outcome.warnings) + str(outcome.result or "")
    _check_extras(row, inp, outcome, places)


if __name__ == "__main__":
    counts = collections.Counter((row["expect"], row["route"]) for row in ROWS)
    print(f"{len(ROWS)} rows")
    for expect in CLASSES:
        per_route = ", ".join(f"{route} {counts[(expect, route)]}" for route in ROUTES if counts[(expect, route)])
        print(f"{expect:12} {sum(counts[(expect, route)] for route in ROUTES):4}  ({per_route})")
