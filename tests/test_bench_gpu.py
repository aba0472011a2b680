"""benchmarks/bench_gpu.py: both sides of each ratio get the same session options, and no GPU is said."""

import pytest
import tensorflow as tf

from script_modules import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_gpu.py")


@pytest.mark.parametrize("setting", ["user", "npu_config_proto"])
def test_plain_differs_from_the_rewritten_sides_only_by_the_npu_optimizer(bench, setting):
    plain = bench.session_config(setting, "plain", "gpu")
    for kind in ("native", "emulate"):
        config = bench.session_config(setting, kind, "gpu")
        (custom,) = config.graph_options.rewrite_options.custom_optimizers
        assert custom.name == "NpuOptimizer"
        assert custom.parameter_map["sim_fp16_execution"].s == kind.encode()
        assert custom.parameter_map["precision_mode"].s == b"allow_mix_precision"
        del config.graph_options.rewrite_options.custom_optimizers[:]
        assert config == plain
    assert plain.gpu_options.allow_growth


def test_the_cpu_check_hides_the_gpu_on_every_side(bench):
    for kind in bench.KINDS:
        assert bench.session_config("user", kind, "cpu").device_count["GPU"] == 0


def test_without_a_gpu_it_says_so_and_exits_with_status_2(bench, monkeypatch, capsys):
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    monkeypatch.setattr("sys.argv", ["bench_gpu.py"])
    assert bench.main() == 2
    assert "no GPU that TensorFlow" in capsys.readouterr().err


def test_unknown_settings_are_named(bench, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_gpu.py", "--settings", "user,remote"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--settings names remote" in capsys.readouterr().err
