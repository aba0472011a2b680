"""benchmarks/bench_cost.py: a sweep model's row carries both step ratios and the steady step of the GeOp calls
alone, the table names both configurations, and a figure past its target is reported as not met."""

import math

import pytest

from script_modules import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_cost.py")


def test_one_small_model_gives_a_first_and_a_steady_ratio_and_the_table_names_both_configurations(bench):
    row = bench.model_row("user_cond_mlp", settings=("user",), rounds=1, steady_rounds=1, steady_steps=3,
                          steady_round_s=0.2)
    figures = row["user"]
    # a step of about a millisecond: the round runs as many steps as fill 0.2 s, not 3
    assert figures["steady_steps"] > 3
    assert figures["steady_steps"] * figures["steady_plain_ms"] / 1000 > 0.2 / 3
    for key in ("first", "first_cpu", "steady", "first_plain_s", "first_simulated_s", "steady_plain_ms",
                "steady_geop_floor", "first_geop_floor", "first_rewrite_s"):
        assert math.isfinite(figures[key]) and figures[key] > 0, (key, figures)
    # the rewrite ran inside the simulated first step, so it is part of that step's extra seconds
    assert figures["first_rewrite_s"] < figures["first_simulated_s"]
    assert row["nodes"] > 0
    table = bench.model_table([row])
    (user_line,) = [line for line in table.splitlines() if " user " in line]
    (other_line,) = [line for line in table.splitlines() if " npu_config_proto " in line]
    assert f"{figures['first']:.2f}x" in user_line and f"{figures['steady']:.2f}x" in user_line
    assert user_line.endswith(f"{figures['steady_geop_floor']:.2f}x")  # the GeOp calls' own cost beside it
    assert "not measured" in other_line


def test_a_figure_past_its_target_is_named_as_not_met(bench):
    figures = {"first_plain_s": 1.0, "first_simulated_s": 1.5, "first": 1.5, "steady_plain_ms": 10.0,
               "steady": 1.05, "steady_range": [1.0, 1.1]}
    result = {"models": [{"model": "keras_cnn", "nodes": 10, "user": figures, "npu_config_proto": figures}],
              "allreduce": {"user": {64: 1500.0}, "npu_config_proto": {64: 400.0}, "floor": {64: 800.0}}}
    text = bench.summary(result)
    assert text.startswith("targets met: 3 of 6")
    assert "keras_cnn user first 1.50" in text and "allreduce 64 MiB npu_config_proto" in text
    assert "steady" not in text
    assert "NOT MET" in bench.model_table(result["models"]) and "NOT MET" in bench.allreduce_table(result["allreduce"])


def test_an_unknown_model_or_configuration_is_named(bench):
    with pytest.raises(ValueError, match="unknown sweep model 'NoSuchNet'"):
        bench.model_row("NoSuchNet")
    with pytest.raises(ValueError, match="unknown configuration 'gpu'"):
        bench.session_configs("gpu")


def test_the_allreduce_table_puts_each_bandwidth_beside_its_cpu_bound_ceiling(bench):
    figures = {"user": {64: 300.0}, "npu_config_proto": {64: 250.0}, "floor": {64: 1000.0},
               "ceiling": {"user": {64: 400.0}, "npu_config_proto": {64: 500.0}},
               "cpu ms per MiB": {"user": {64: 2.5}, "npu_config_proto": {64: 2.0}},
               "floor cpu ms per MiB": {64: 0.6}}
    lines = bench.allreduce_table(figures).splitlines()
    (user_line,) = [line for line in lines if line.startswith("user ")]
    (other_line,) = [line for line in lines if line.startswith("npu_config_proto ")]
    assert "0.75x" in user_line and "2.50" in user_line and "0.60" in user_line  # 300 of a 400 MB/s ceiling
    assert "0.50x" in other_line and "NOT MET" in other_line
    assert "CPU ceiling" in lines[0] and any("cores" in line for line in lines)


def test_the_rewrite_table_gives_the_handed_over_graph_its_own_row_and_reads_an_older_json(bench):
    ratios = {"precision": [0.9, 1.1, 0.95], "pipeline": [1.15, 1.3, 1.25]}
    figures = {"harness": {**ratios, "floor": [0.8]}, "handed_over": {"precision": [0.8], "pipeline": [1.1]},
               "user": ratios, "npu_config_proto": ratios}
    table = bench.rewrite_table(figures)
    (handed,) = [line for line in table.splitlines() if "as a Session hands it over" in line]
    assert "0.80x" in handed and "1.10x" in handed and "NOT MET" not in handed.upper()
    text = bench.summary({"rewrite": figures})
    assert text.startswith("targets met: 5 of 8") and "ResNet-50 harness pipeline 1.25" in text
    older = {key: value for key, value in figures.items() if key != "handed_over"}
    assert "hands it over" not in bench.rewrite_table(older)
    assert bench.summary({"rewrite": older}).startswith("targets met: 3 of 6")


def test_the_first_loss_part_takes_the_models_of_a_short_first_step_and_counts_its_ratios(bench):
    short = {"first_plain_s": 0.05, "first": 1.8}
    long = {"first_plain_s": 3.0, "first": 1.1}
    result = {"models": [{"model": "keras_cnn", "user": short, "npu_config_proto": long},
                         {"model": "ResNet50", "user": long, "npu_config_proto": long},
                         {"model": "lstm_v1", "error": "it failed"}]}
    assert bench.first_loss_models(["keras_cnn", "ResNet50", "lstm_v1"], result) == ["keras_cnn"]
    assert bench.first_loss_models(["keras_cnn", "ResNet50"], {}) == ["keras_cnn", "ResNet50"]  # no models part
    parts = dict.fromkeys(("imports", "build", "session", "first_step"), 0.5)
    row = {"model": "keras_cnn"}
    for setting, simulated in (("user", 2.2), ("npu_config_proto", 2.8)):
        row[setting] = {"plain": {**parts, "total": 2.0}, "simulated": {**parts, "total": simulated},
                        "ratio": simulated / 2.0, "added_s": simulated - 2.0}
    text = bench.summary({"first_loss": [row]})
    assert text.startswith("targets met: 1 of 2") and "keras_cnn npu_config_proto first loss 1.40" in text
    (user_line,) = [line for line in bench.first_loss_table([row]).splitlines() if " user " in line]
    assert "1.10x" in user_line and "+0.20s" in user_line


@pytest.fixture(scope="module")
def first_loss():
    return load_script("benchmarks/bench_first_loss.py")


def test_a_first_loss_process_times_the_whole_script_in_parts_and_a_failing_one_is_named(bench, first_loss):
    configs = bench.session_configs("user")
    plain = first_loss.one_process("user_cond_mlp", configs["plain"], "plain")
    simulated = first_loss.one_process("user_cond_mlp", configs["simulated"], "simulated")
    for figures in (plain, simulated):
        assert math.isfinite(figures["loss"])
        # from the process's start: the interpreter, the imports, the graph, the Session, the first step
        assert figures["total"] == pytest.approx(sum(figures[part] for part in first_loss.PARTS), abs=1e-6)
        assert figures["imports"] > figures["first_step"] > 0
    # the simulated Session rewrote the graph (float16 rounding), so its loss is not the plain one's bits
    assert simulated["loss"] != plain["loss"]
    with pytest.raises(RuntimeError, match="the plain script of NoSuchNet failed: KeyError"):
        first_loss.one_process("NoSuchNet", configs["plain"], "plain")
