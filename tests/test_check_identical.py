"""benchmarks/check_identical.py's comparison: bit-identical losses pass, a loss one bit away fails and is shown,
and a changed decision is listed by node op and column."""

import json

import pytest

from script_modules import load_script


@pytest.fixture(scope="module")
def check():
    return load_script("benchmarks/check_identical.py")


def _digests(path, loss, dtype_after, extra_node=False):
    rows = [{"name": "conv", "op": "Conv2D", "list": "white", "dtype_before": "float32", "dtype_after": dtype_after,
             "placement": "device", "geop": "GeOp1", "reason": "white list"}]
    if extra_node:
        rows.append({"name": "conv/round", "op": "NpuSimRoundToFloat16", "placement": "device"})
    report = {"summary": {}, "nodes": rows}
    graph = "a" if dtype_after == "float16" and not extra_node else "b"
    digests = {
        "zoo.keras_cnn/default": {"graph": graph, "report": graph, "decisions": graph, "nodes": len(rows),
                                  "ops": {"Conv2D": 1, **({"NpuSimRoundToFloat16": 1} if extra_node else {})},
                                  "report_json": report},
        "zoo.keras_cnn/float32": {"losses": {"plain": [loss.hex()], "mixed": [(2.5).hex()]}},
    }
    path.write_text(json.dumps(digests))
    return str(path)


def test_the_same_digests_and_bit_identical_losses_compare_equal(check, tmp_path, capsys):
    before = _digests(tmp_path / "before.json", 2.0, "float16")
    after = _digests(tmp_path / "after.json", 2.0, "float16")
    assert check.compare(before, after) == 0
    out = capsys.readouterr().out
    assert "losses same" in out and "2 compared, 0 with a different graph, decisions or losses" in out


def test_a_loss_one_bit_away_and_a_changed_node_fail_and_are_named(check, tmp_path, capsys):
    before = _digests(tmp_path / "before.json", 2.0, "float16")
    nudged = float.fromhex((2.0).hex().replace("0x1.0000000000000p+1", "0x1.0000000000001p+1"))
    after = _digests(tmp_path / "after.json", nudged, "float32", extra_node=True)
    assert check.compare(before, after) == 1
    out = capsys.readouterr().out
    assert "losses DIFFER" in out and "plain: first differs at value 0" in out
    assert "Conv2D (dtype_after) x1" in out
    assert "nodes only after by op: NpuSimRoundToFloat16 x1" in out
    assert "NpuSimRoundToFloat16 +1" in out
    assert "2 compared, 2 with a different graph, decisions or losses" in out


def test_a_case_whose_input_graph_differs_is_named_not_compared_and_not_counted_as_kept(check, tmp_path, capsys):
    """A builder that gives each process another graph makes its rewrites incomparable: the case is named and
    counted apart, neither passed as the same nor failed as a change; cases with equal inputs still compare."""
    paths = {}
    for side, model_input in (("before", "x"), ("after", "y")):
        path = tmp_path / f"{side}.json"
        _digests(path, 2.0, "float16")
        digests = json.loads(path.read_text())
        digests["zoo.keras_cnn/default"]["input"] = model_input
        digests["zoo.keras_cnn/mix"] = dict(digests["zoo.keras_cnn/default"], input="same", graph=side)
        path.write_text(json.dumps(digests))
        paths[side] = str(path)
    assert check.compare(paths["before"], paths["after"]) == 1  # the mix case's graph differs
    out = capsys.readouterr().out
    assert "zoo.keras_cnn/default" in out and "NOT COMPARED" in out
    assert "2 compared, 1 with a different graph, decisions or losses; 1 not compared" in out
