"""TF 1.15-era scripts run unchanged on TensorFlow 2.15 through `npu-sim run`, and the TF1 mapping's parts on their own.

The scripts in tests/tf1_scripts/ run as subprocesses (the TF1 mapping turns TensorFlow's v2
behaviour off for the whole process, which this pytest process must keep); they run two at a time
once per module. The rest checks npu_sim_bridge.tf1compat's parts in-process without installing the
import hook.
"""

import builtins
import concurrent.futures
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.cli.main import build_parser
from npu_sim_bridge.tf1compat import contrib as tf1_contrib
from npu_sim_bridge.tf1compat import hook as tf1
from npu_sim_bridge.tf1compat import view
from npu_sim_bridge.tf1compat.hparams import HParams

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_scripts")
V1 = tf.compat.v1

# name -> (through `npu-sim run`?, command-line arguments after the runner)
RUNS = {
    "keras": (True, ["keras_one_shot_iterator.py"]),
    "estimator": (True, ["estimator_npu_run_config.py"]),
    "session": (True, ["session_app_flags.py", "--steps", "4"]),
    "queue": (True, ["queue_runner_host_scope.py"]),
    "loss_scale": (True, ["loss_scale_loop.py"]),
    "contrib": (True, ["contrib_symbols.py"]),
    "probe_exit": (True, ["probe.py", "exit=3", "--flag", "value with space"]),
    "probe_raise": (True, ["probe.py", "raise"]),
    "tf2": (True, ["--tf2", "tf2_script.py"]),
    "star_import": (False, ["star_import_after_tf.py"]),
}


def _run(through_cli, args):
    command = [sys.executable, "-m", "npu_sim_bridge", "run"] if through_cli else [sys.executable]
    args = [arg if not arg.endswith(".py") else os.path.join(SCRIPTS, arg) for arg in args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run(command + args, capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(name="runs", scope="module")
def runs_fixture():
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_run, *spec) for name, spec in RUNS.items()}
        return {name: future.result() for name, future in futures.items()}


def _line(result, prefix):
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    assert lines, (f"no line starting {prefix!r}; exit {result.returncode}\n"
                   f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return lines[-1]


def _value(line, key):
    match = re.search(rf"\b{key} (\S+)", line)
    assert match, f"{key!r} not in {line!r}"
    return match.group(1)


def _succeeded(result):
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def _line_of(path, text):
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if text in line:
                return number
    raise AssertionError(f"{text!r} not in {path}")


# ---------------------------------------------------------------------------------------------------
# Whole scripts, as users run them

def test_keras_model_fed_by_make_one_shot_iterator_trains_in_an_npu_session(runs):
    line = _line(_succeeded(runs["keras"]), "TF1 keras")
    assert float(_value(line, "loss_last")) < float(_value(line, "loss_first"))
    assert int(_value(line, "rewrites")) > 0  # K.set_session(sess) reached the Session tf.keras trains in


def test_estimator_with_npu_run_config_init_trains(runs):
    line = _line(_succeeded(runs["estimator"]), "TF1 estimator")
    assert int(_value(line, "global_step")) == 3
    assert int(_value(line, "rewrites")) > 0


def test_session_script_with_tf_app_run_and_tf_flags_trains(runs):
    result = _succeeded(runs["session"])
    line = _line(result, "TF1 session")
    assert int(_value(line, "global_step")) == 4  # --steps 4 reached tf.flags through tf.app.run
    assert _value(line, "dim_value") == "4"       # TensorShape v1: shape[1].value
    assert int(_value(line, "rewrites")) > 0
    assert "trained 4 steps" in result.stderr     # tf.logging


def test_queue_runner_pipeline_inside_without_npu_compile_scope_trains_on_the_host(runs):
    line = _line(_succeeded(runs["queue"]), "TF1 queue")
    assert float(_value(line, "loss_last")) < float(_value(line, "loss_first"))
    assert int(_value(line, "host_scoped")) > 0 and _value(line, "all_host") == "True"


def test_loss_scaled_loop_skips_overflow_steps_then_trains(runs):
    line = _line(_succeeded(runs["loss_scale"]), "TF1 loss_scale")
    steps_run, global_step = int(_value(line, "steps_run")), int(_value(line, "global_step"))
    assert 0 < global_step < steps_run                     # the first steps overflowed in float16 and were skipped
    assert float(_value(line, "final_scale")) < 2 ** 18
    assert float(_value(line, "loss_last")) < float(_value(line, "loss_first"))


def test_contrib_symbols_resolve_to_working_equivalents(runs):
    result = _succeeded(runs["contrib"])
    trained = _line(result, "CONTRIB trained")
    assert float(_value(trained, "loss_last")) < float(_value(trained, "loss_first"))
    assert _value(trained, "moving_mean_updated") == "True"  # batch_norm(updates_collections=None) forced updates
    assert _line(result, "CONTRIB variables").split()[2:] == [
        "LayerNorm/beta", "LayerNorm/gamma", "conv1/BatchNorm/beta", "conv1/BatchNorm/moving_mean",
        "conv1/BatchNorm/moving_variance", "conv1/weights", "fully_connected/biases", "fully_connected/weights",
        "logits/biases", "logits/weights"]
    assert _line(result, "CONTRIB hparams") == (
        "CONTRIB hparams {'learning_rate': 0.1, 'layers': [8, 4], 'use_bn': False}")
    assert _line(result, "CONTRIB same_objects") == "CONTRIB same_objects True True True"


def test_contrib_names_without_equivalent_fail_naming_the_replacement(runs):
    result = _succeeded(runs["contrib"])
    cloud = _line(result, "CONTRIB error cloud:")
    assert "tf.contrib.cloud.BigtableClient is not available" in cloud
    assert "use the google-cloud-bigtable client outside the graph" in cloud
    assert _line(result, "CONTRIB cudnn_rnn same object:") == "CONTRIB cudnn_rnn same object: True"
    assert "no attribute 'not_a_contrib_module'" in _line(result, "CONTRIB error unknown:")
    assert "TF1CompatWarning: tf.contrib.cloud is not available" in result.stderr
    assert f"{os.path.join(SCRIPTS, 'contrib_symbols.py')}:" in result.stderr  # the warning points at the script


def test_script_gets_argv_name_path_and_exit_status_as_python_gives_them(runs):
    result = runs["probe_exit"]
    assert result.returncode == 3, result.stderr[-3000:]
    assert _line(result, "PROBE argv") == (
        f"PROBE argv ['exit=3', '--flag', 'value with space'] name __main__ path0 {SCRIPTS}")
    assert _line(result, "PROBE tf") == "PROBE tf tensorflow TF1Module helper_same_tf True eager False has_session True"
    # Libraries keep the real TensorFlow: keras.src.backend's `tf`, and sys.modules["tensorflow"].
    assert _line(result, "PROBE library_tf") == "PROBE library_tf tensorflow.compat.v2 sys_modules_tf module"


def test_traceback_points_at_the_scripts_own_lines(runs):
    result = runs["probe_raise"]
    assert result.returncode == 1
    probe, helpers = os.path.join(SCRIPTS, "probe.py"), os.path.join(SCRIPTS, "tf1_helpers.py")
    call_line = _line_of(probe, "tf1_helpers.uses_a_tensorflow2_name()")
    name_line = _line_of(helpers, "return tf.optimizers.SGD")
    trace = result.stderr[result.stderr.index("Traceback (most recent call last):"):]
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
    assert frames == [(probe, str(call_line), "<module>"), (helpers, str(name_line), "uses_a_tensorflow2_name")]
    assert "AttributeError: module 'tensorflow' has no attribute 'optimizers'" in trace
    assert "npu-sim run --tf2" in trace


def test_tf2_flag_leaves_a_tensorflow2_script_alone(runs):
    line = _line(_succeeded(runs["tf2"]), "TF2 eager")
    assert line == "TF2 eager True weight 2.512"  # three eager SGD steps on (3w - 6)^2 from w = 1


def test_star_import_after_import_tensorflow_gives_the_tf1_api_in_graph_mode(runs):
    line = _line(_succeeded(runs["star_import"]), "STAR")
    assert line.startswith("STAR tf TF1Module eager False has_contrib True rewrites ")
    assert int(_value(line, "rewrites")) > 0


# ---------------------------------------------------------------------------------------------------
# The mapping's parts, in-process (the import hook is never installed here)

def test_tf1_module_has_the_v1_names_and_explains_tensorflow2_only_names():
    module = view.tf1_module()
    assert module.Session is V1.Session and module.ConfigProto is V1.ConfigProto and module.app is V1.app
    assert module.compat.v1 is module and module.compat.v2.function is tf.function
    assert module.compat.as_bytes is tf.compat.as_bytes
    keras_backend = sys.modules["keras.src.backend"]
    assert module.python.keras.backend.get_session is keras_backend.get_session  # TF 1.15's tf.keras: Keras 2.15
    assert module.python.framework.ops.Graph is tf.Graph  # the real module's names through the TF 1.15 view
    with pytest.raises(AttributeError, match=r"no attribute 'optimizers'.*tf\.compat\.v2\.optimizers.*--tf2"):
        module.optimizers  # pylint: disable=pointless-statement


def test_user_code_is_what_is_not_an_installed_library(tmp_path):
    script = str(tmp_path / "train.py")
    assert tf1.is_user_code({"__name__": "__main__", "__file__": script})
    assert tf1.is_user_code({"__name__": "models.resnet", "__file__": str(tmp_path / "models" / "resnet.py")})
    assert not tf1.is_user_code({"__name__": "tensorflow.python.ops.nn", "__file__": tf.__file__})
    assert not tf1.is_user_code({"__name__": "npu_sim_bridge.runtime.scopes", "__file__": tf1_contrib.__file__})
    assert not tf1.is_user_code({"__name__": "keras.src.backend", "__file__": script})  # a library by name
    assert not tf1.is_user_code({"__name__": "x", "__file__": "/opt/env/lib/site-packages/x.py"})
    assert not tf1.is_user_code(None) and not tf1.is_user_code({"__name__": "exec'd"})


@pytest.fixture(name="hook")
def hook_fixture(monkeypatch):
    """tf1._tf1_import callable as the import statement would call it, without replacing builtins.__import__."""
    monkeypatch.setattr(tf1, "_original_import", builtins.__import__)
    user = {"__name__": "__main__", "__file__": "/home/someone/project/train.py"}
    return lambda name, fromlist=None, importer=user: tf1._tf1_import(name, importer, None, fromlist, 0)


def test_import_hook_gives_user_code_the_tf1_view_and_libraries_the_real_module(hook):
    assert hook("tensorflow") is view.tf1_module()
    assert hook("tensorflow", importer={"__name__": "keras.src.x", "__file__": "/x.py"}) is sys.modules["tensorflow"]
    assert hook("tensorflow.compat.v1") is view.tf1_module()                 # `import tensorflow.compat.v1 as tf`
    assert hook("tensorflow.compat", ("v1",)).v1 is view.tf1_module()        # `from tensorflow.compat import v1`
    assert hook("tensorflow.contrib", ("slim",)).slim.conv2d is sys.modules["tf_slim"].conv2d
    backend = hook("tensorflow.python.keras", ("backend",)).backend  # TF 1.15's tf.keras
    assert backend.get_session is sys.modules["keras.src.backend"].get_session
    assert hook("tensorflow.python.keras.layers", ("Dense",)).Dense is tf.keras.layers.Dense
    assert hook("tensorflow.python.framework", ("ops",)).ops.Graph is tf.Graph
    assert hook("tensorflow.keras.optimizers", ("Adam",)).Adam is V1.keras.optimizers.Adam  # the Keras legacy one
    with pytest.raises(ModuleNotFoundError, match="no module 'not_a_module' either"):
        hook("tensorflow.contrib.not_a_module")
    with pytest.raises(ImportError, match=r"tf\.contrib\.data\.sliding_window_batch.*dataset\.window"):
        hook("tensorflow.contrib.data", ("sliding_window_batch",))


def test_removed_contrib_module_imports_with_a_warning_and_fails_on_use():
    contrib = tf1_contrib.Contrib()  # a fresh one: the process-wide object warns once per module
    with pytest.warns(tf1_contrib.TF1CompatWarning, match=r"tf\.contrib\.gan .*tensorflow_gan"):
        gan = contrib.gan
    with pytest.raises(tf1_contrib.TF1ContribError, match=r"tf\.contrib\.gan\.gan_model is not "
                                                           r"available.*tensorflow_gan"):
        gan.gan_model  # pylint: disable=pointless-statement
    assert isinstance(tf1_contrib.TF1ContribError("x"), AttributeError)
    assert tf1_contrib.import_contrib(["tpu", "python", "tpu", "tpu_estimator"]).TPUEstimator is \
        V1.estimator.tpu.TPUEstimator


def test_hparams_parse_keeps_types_and_rejects_unknown_names():
    hparams = HParams(learning_rate=0.1, steps=10, layers=[64, 32], name="resnet", use_bn=True)
    hparams.parse("learning_rate=2,steps=20, layers=[8,4,2],name=vgg,use_bn=false")
    assert hparams.values() == {"learning_rate": 2.0, "steps": 20, "layers": [8, 4, 2], "name": "vgg", "use_bn": False}
    assert isinstance(hparams.learning_rate, float) and "steps" in hparams and hparams.get("missing", 7) == 7
    again = HParams(learning_rate=0.0, steps=0, layers=[0], name="", use_bn=True)
    assert again.parse_json(hparams.to_json()).values() == hparams.values()
    with pytest.raises(ValueError, match="unknown hyperparameter 'depth'"):
        hparams.parse("depth=3")
    with pytest.raises(ValueError, match="could not parse 'x' as int for hyperparameter 'steps'"):
        hparams.parse("steps=x")
    with pytest.raises(ValueError, match="'steps' is of type int"):
        hparams.set_hparam("steps", 1.5)


def test_cli_run_has_the_tf2_flag():
    args = build_parser().parse_args(["run", "--tf2", "train.py", "--steps", "3"])
    assert (args.tf2, args.script, args.script_args) == (True, "train.py", ["--steps", "3"])
    assert build_parser().parse_args(["run", "train.py"]).tf2 is False
