"""benchmarks/bench_fused_matmul.py: its kernel rows time both forms and say whether their bits agree, and a
step row gives both Sessions' ratios and compares their losses; without oneDNN it says there is nothing to
compare."""

import math

import pytest

from npu_sim_bridge.passes.fusion import apart
from script_modules import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_fused_matmul.py")


def test_without_onednn_the_script_says_so_and_stops(bench, monkeypatch, capsys):
    monkeypatch.setattr(apart, "onednn_enabled", lambda: False)
    assert bench.main(["--parts", "kernels"]) == 2
    assert "without oneDNN" in capsys.readouterr().out


def test_a_kernel_row_times_both_forms_and_compares_their_bits(bench, monkeypatch):
    monkeypatch.setattr(bench, "SHAPES", [(16, 32, 64)])
    rows = bench.kernel_rows(rounds=1, runs=2)
    assert [row["fused_ops"] for row in rows] == [("BiasAdd",), ("BiasAdd", "Relu")]
    for row in rows:
        assert math.isfinite(row["apart_us"]) and row["apart_us"] > 0 and row["fused_us"] > 0
        # the premise of the product's step, where it takes the fused MatMul apart
        assert row["same_bits"] or not apart.onednn_enabled()


def test_a_step_row_runs_the_model_apart_and_kept_fused_with_the_same_losses(bench):
    row = bench.step_row("user_cond_mlp", "npu_config_proto", rounds=1, steps=3, min_round_s=0.05)
    assert row["same_losses"]
    for kind in ("apart", "fused"):
        assert math.isfinite(row[kind]) and row[kind] > 0 and row[kind + "_range"][0] <= row[kind]
    assert row["plain_ms"] > 0
    assert row["taken_apart_kept_fused"] == 0
    assert row["taken_apart"] >= 2 or not apart.onednn_enabled()  # the MLP's dense layers, in its GeOp body
