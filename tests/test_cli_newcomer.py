"""What a newcomer meets first: --json on every reporting subcommand, shell completion, a missing TensorFlow said
in one line, one-line warnings, `python -m npu_sim_bridge...` without runpy's warning, check's not-simulated
stubs, and the demo's next steps."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge import api_resolve
from npu_sim_bridge.cli.completion import subcommands
from npu_sim_bridge.cli.main import build_parser
from npu_sim_bridge.cli.main import main as cli_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Subcommands that run a user's script and print what it prints: they have no report of their own.
SCRIPT_RUNNERS = {"run", "launch", "completion"}


def run_python(code, env=None, args=()):
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.run([sys.executable, *args, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=300)


# ------------------------------------------------------------------------------------------ --json
def test_every_subcommand_that_reports_takes_json():
    for name, parser in subcommands(build_parser()).items():
        options = {text for action in parser._actions for text in action.option_strings}  # pylint: disable=W0212
        assert ("--json" in options) == (name not in SCRIPT_RUNNERS), name


def small_graph(path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 64], name="x")  # big/MatMul gives ~1e5: inf in float16
        weights = tf.constant(np.random.RandomState(0).uniform(400, 800, (64, 4)).astype(np.float32))
        big = tf.matmul(x, weights, name="big/MatMul")
        tf.reduce_sum(tf.multiply(big, 1e-3), axis=1, name="out")
    tf.io.write_graph(graph.as_graph_def(), os.path.dirname(path), os.path.basename(path), as_text=False)


def test_rewrite_json_says_what_it_wrote(tmp_path, capsys):
    graph, out = str(tmp_path / "model.pb"), str(tmp_path / "out.pbtxt")
    small_graph(graph)
    assert cli_main(["rewrite", graph, "-o", out, "--fetch", "out", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output"] == out and os.path.getsize(out) > 0 and data["report"] is None
    assert data["nodes_before"] > 0 and data["nodes_after"] > 0


def test_bisect_json_gives_the_report_and_the_files_to_set(tmp_path, capsys):
    graph, feed = str(tmp_path / "model.pb"), str(tmp_path / "x.npy")
    small_graph(graph)
    np.save(feed, np.abs(np.random.RandomState(1).normal(3, 1, (4, 64))).astype(np.float32))
    mixlist = str(tmp_path / "fix.json")
    assert cli_main(["bisect", graph, "--fetch", "out", "--feed", f"x={feed}", "-o", mixlist, "--json",
                     "--workdir", str(tmp_path / "runs")]) == 0
    data = json.loads(capsys.readouterr().out)  # stdout holds the JSON alone; progress went to stderr
    assert data["written"]["modify_mixlist"] == mixlist and os.path.exists(mixlist)
    assert data["fix"]["types"] or data["fix"]["nodes"]
    assert data["runs"] >= 2 and data["trials"]


# ------------------------------------------------------------------------------------------ completion
def test_bash_completion_completes_subcommands_options_and_choices(capsys, tmp_path):
    assert cli_main(["completion", "bash"]) == 0
    script = tmp_path / "npu-sim.bash"
    script.write_text(capsys.readouterr().out)

    def complete(*words):
        code = (f"source {script}; COMP_WORDS=(npu-sim {' '.join(words)}); COMP_CWORD={len(words)}; "
                'complete -p npu-sim >/dev/null && _npu_sim_complete; echo "${COMPREPLY[@]}"')
        done = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("ins") == ["inspect"]
    assert complete("bis") == ["bisect"]
    assert "--json" in complete("rewrite", "--j") and "--fetch" in complete("bisect", "--f")
    assert complete("completion", "z") == ["zsh"]
    assert complete("compare", "--no-p") == ["--no-progress"]


def test_zsh_completion_loads_bash_completion_first(capsys):
    assert cli_main(["completion", "zsh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("autoload -U +X bashcompinit && bashcompinit\n") and "complete -o filenames" in out


# ------------------------------------------------------------------------------------------ TensorFlow missing
@pytest.fixture(name="without_tensorflow", scope="module")
def without_tensorflow_fixture(tmp_path_factory):
    """A sys.path with this Python's site-packages minus TensorFlow (each other entry linked)."""
    import site

    folder = tmp_path_factory.mktemp("site")
    for packages in site.getsitepackages():
        for name in os.listdir(packages):
            if not name.startswith("tensorflow") and not (folder / name).exists():
                os.symlink(os.path.join(packages, name), folder / name)
    return f"import sys; sys.path[:0] = [{str(folder)!r}, {ROOT!r}]; "


def test_import_without_tensorflow_says_what_to_install(without_tensorflow):
    done = run_python(without_tensorflow + "import npu_sim_bridge", args=("-S",))
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "ModuleNotFoundError" not in done.stderr
    assert last.startswith("npu_sim_bridge.TensorFlowMissingError: npu_sim_bridge needs TensorFlow")
    assert "pip install tensorflow-cpu==2.15.1" in last


@pytest.mark.parametrize("args", [["info"], ["info", "--json"], ["inspect", "model.pb"]])
def test_npu_sim_without_tensorflow_is_one_line(without_tensorflow, args):
    code = without_tensorflow + (f"sys.argv = ['npu-sim', *{args!r}]; from npu_sim_bridge.cli.main import main; "
                                 "sys.exit(main())")
    done = run_python(code, args=("-S",))
    assert done.returncode == 1
    if "--json" in args:
        error = json.loads(done.stdout)["error"]
        assert error["type"] == "TensorFlowMissingError" and "pip install tensorflow-cpu" in error["message"]
    else:
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"npu-sim {args[0]}: error: npu_sim_bridge "
                                                                        "needs TensorFlow")
        assert "install it with `pip install tensorflow-cpu==2.15.1`" in done.stderr


def test_completion_and_version_work_without_tensorflow(without_tensorflow):
    code = without_tensorflow + ("sys.argv = ['npu-sim']; from npu_sim_bridge.cli.main import main; "
                                 "status = main(['completion', 'bash']); print('tensorflow' in sys.modules); "
                                 "sys.exit(status)")
    done = run_python(code, args=("-S",))
    assert done.returncode == 0 and done.stdout.strip().endswith("False") and "_npu_sim_complete" in done.stdout


# ------------------------------------------------------------------------------------------ one-line warnings
def test_the_unknown_option_warning_is_one_line_without_source():
    import warnings

    from npu_sim_bridge.config.options import from_config_proto

    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["no_such_option"].s = b"1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_config_proto(config); line = sys._getframe().f_lineno  # noqa: E702  pylint: disable=W0212
    assert len(caught) == 1
    # what warnings.showwarning prints to stderr
    text = warnings.formatwarning(caught[0].message, caught[0].category, caught[0].filename, caught[0].lineno)
    assert text == (f"{__file__}:{line}: NpuSimConfigWarning: unknown option 'no_such_option' is ignored; it is not "
                    "a key the NpuOptimizer reads (npu_sim_bridge.config.KEYS lists them)\n")


def test_other_warnings_keep_pythons_format():
    import warnings

    text = warnings.formatwarning("plain", UserWarning, "x.py", 3, line="call()")
    assert text == "x.py:3: UserWarning: plain\n  call()\n"


# ------------------------------------------------------------------------------------------ python -m
def test_python_m_native_build_gives_no_runpy_warning():
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "npu_sim_bridge.native.build"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr and done.stdout.count(".so") == 4


# ------------------------------------------------------------------------------------------ check
def test_a_stub_that_only_raises_is_found_by_reading_it():
    from npu_sim_bridge.runtime import loss_scale, npu_plugin

    message = api_resolve.not_simulated(npu_plugin.malloc_shared_memory)
    assert message.startswith("npu_plugin.malloc_shared_memory: RDMA host-memory embedding")
    assert "tf.nn.embedding_lookup" in message
    assert api_resolve.not_simulated(npu_plugin.set_device_sat_mode) is None
    assert api_resolve.not_simulated(loss_scale.LossScaleManager.get_loss_scale) is None  # abstract, not a stub

    def bare():
        """Not yet."""
        raise NotImplementedError

    def worded(name):
        raise NotImplementedError(f"{name} is " + "not simulated")

    bare.__qualname__ = "bare"
    worded.__qualname__ = "worded"
    assert api_resolve.not_simulated(bare) == ""
    assert api_resolve.not_simulated(worded) == "{name} is not simulated"


def test_check_reports_a_stub_as_missing_with_its_message(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("from npu_bridge.estimator.npu import npu_plugin\n"
                      "npu_plugin.malloc_shared_memory('table', [10, 4], 0)\n"
                      "npu_plugin.set_device_sat_mode(1)\n"
                      "from npu_bridge.estimator.npu.npu_plugin import init_rdma_pool\n")
    assert cli_main(["check", str(script), "--json"]) == 1
    apis = {entry["api"]: entry for entry in json.loads(capsys.readouterr().out)["apis"]}
    stub = apis["npu_bridge.estimator.npu.npu_plugin.malloc_shared_memory"]
    assert stub["status"] == "missing" and stub["locations"] == [f"{script}:2"]  # the call fails at run
    assert stub["note"].startswith("not simulated: calling it raises NotImplementedError: "
                                   "npu_plugin.malloc_shared_memory: RDMA")
    assert apis["npu_bridge.estimator.npu.npu_plugin.set_device_sat_mode"]["status"] == "provided"
    imported = apis["npu_bridge.estimator.npu.npu_plugin.init_rdma_pool"]  # the import runs
    assert imported["status"] == "accepted without effect"
    assert imported["note"].startswith("not simulated: it imports, but calling it raises NotImplementedError: "
                                       "npu_plugin.init_rdma_pool: RDMA")


# ------------------------------------------------------------------------------------------ make demo
def test_the_demo_ends_by_naming_the_picture_and_the_tensorboard_run(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("quickstart", os.path.join(ROOT, "examples",
                                                                             "quickstart_session.py"))
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        tf.identity(tf.compat.v1.layers.dense(x, 3), name="y")
    report_dir = str(tmp_path / "reports")
    report = npu_sim_bridge.rewrite(graph, {"sim_report_dir": report_dir}, fetches=["y"]).report
    capsys.readouterr()
    quickstart.print_next_steps(report, report_dir)
    lines = capsys.readouterr().out.splitlines()
    picture = next(line.split("open ", 1)[1] for line in lines if line.strip().startswith("open "))
    logdir = next(line.split("--logdir ", 1)[1] for line in lines if "tensorboard --logdir" in line)
    assert picture.endswith(".html") and os.path.isfile(picture)
    assert os.path.isdir(logdir) and os.listdir(logdir)
