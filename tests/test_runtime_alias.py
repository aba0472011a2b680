"""The npu_bridge alias and `npu-sim run`, and the seed snippets run as scripts through both import routes."""

import os
import re
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf
from tensorflow.python.keras import backend as old_keras_backend

from npu_sim_bridge import npu_init
from npu_sim_bridge.cli import run
from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.runtime import alias

SEED_DIR = os.path.join(os.path.dirname(__file__), "seed_scripts")
SEED_SCRIPTS = sorted(name for name in os.listdir(SEED_DIR) if name.endswith(".py"))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# In-process `npu-sim run` calls pass --tf2: the TF1 mapping would turn TensorFlow's v2 behaviour off for
# this whole pytest process. The TF1 mapping itself is tested through subprocesses in test_tf1_scripts.py.
IN_PROCESS_RUN = ["run", "--tf2"]


@pytest.fixture(autouse=True)
def no_alias_left_behind():
    alias.uninstall_alias()
    yield
    alias.uninstall_alias()


@pytest.fixture(name="fake_real_npu_bridge")
def fake_real_npu_bridge_fixture(tmp_path):
    package = tmp_path / "site" / "npu_bridge"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("REAL = True\n")
    sys.path.insert(0, str(package.parent))
    try:
        yield package
    finally:
        sys.path.remove(str(package.parent))
        for name in [name for name in sys.modules if name.split(".")[0] == "npu_bridge"]:
            del sys.modules[name]


def test_alias_maps_npu_bridge_modules_onto_the_simulator():
    with pytest.raises(ModuleNotFoundError):
        import npu_bridge  # noqa: F401  (not installed by default: the alias is opt-in)
    alias.install_alias()
    import npu_bridge.npu_init
    from npu_bridge.estimator import npu_ops
    from npu_bridge.estimator.npu.npu_config import DumpConfig, NPURunConfig
    from npu_bridge.estimator.npu.npu_loss_scale_manager import FixedLossScaleManager
    from npu_bridge.hccl import hccl_ops
    from hccl.manage.api import get_rank_size

    from npu_sim_bridge import npu_init
    from npu_sim_bridge.runtime import distributed, loss_scale

    assert npu_bridge.npu_init is npu_init
    assert (NPURunConfig, DumpConfig) == (npu_init.NPURunConfig, npu_init.DumpConfig)
    assert FixedLossScaleManager is loss_scale.FixedLossScaleManager
    assert hccl_ops is distributed and npu_ops is npu_init.npu_ops and get_rank_size() == 1
    with pytest.raises(ModuleNotFoundError, match="npu_sim_bridge does not simulate it"):
        import npu_bridge.embedding.embedding_service  # noqa: F401
    alias.uninstall_alias()
    with pytest.raises(ModuleNotFoundError):
        import npu_bridge.npu_init  # noqa: F401,F811


def test_alias_does_not_shadow_a_real_npu_bridge_unless_asked(fake_real_npu_bridge):
    with pytest.raises(alias.NpuBridgeAliasError, match=re.escape(str(fake_real_npu_bridge))):
        alias.install_alias()
    assert not alias.alias_installed()
    import npu_bridge
    assert npu_bridge.REAL
    alias.install_alias(shadow=True)
    import npu_bridge.npu_init  # noqa: F811
    from npu_sim_bridge import npu_init
    assert npu_bridge.npu_init is npu_init and not hasattr(sys.modules["npu_bridge"], "REAL")


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_run_gives_the_script_what_python_would(tmp_path, capsys):
    script = _write(tmp_path, "probe.py", """\
        import sys
        from npu_bridge.estimator.npu import npu_scope
        print("ARGV", sys.argv[1:], "PATH0", sys.path[0], "NAME", __name__)
        sys.exit(int(sys.argv[1]))
        """)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    with pytest.raises(SystemExit) as stopped:
        cli_main([*IN_PROCESS_RUN, script, "3", "--steps", "2"])
    assert stopped.value.code == 3
    out = capsys.readouterr().out
    assert f"ARGV ['3', '--steps', '2'] PATH0 {tmp_path} NAME __main__" in out
    assert (sys.argv, sys.path) == (saved_argv, saved_path)


def test_run_reports_a_script_error_as_python_does(tmp_path, capsys):
    script = _write(tmp_path, "broken.py", """\
        from npu_bridge.npu_init import *

        NPURunConfig(mix_compile_mode=True, iterations_per_loop=4)
        """)
    assert cli_main([*IN_PROCESS_RUN, script]) == 1
    err = capsys.readouterr().err
    assert f'File "{script}", line 3, in <module>' in err
    assert '"iterations_per_loop" must be 1 with "mix_compile_mode" is True' in err
    assert "runpy" not in err and "npu-sim run: error" not in err
    assert "no graph of this run went through the NpuOptimizer" not in err  # an option error says enough
    assert cli_main([*IN_PROCESS_RUN, str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_run_refuses_to_shadow_a_real_npu_bridge(fake_real_npu_bridge, tmp_path, capsys):
    script = _write(tmp_path, "uses_bridge.py", "import npu_bridge.npu_init\nprint('SIMULATED')\n")
    assert cli_main([*IN_PROCESS_RUN, script]) == 2
    assert "a real npu_bridge is installed" in capsys.readouterr().err
    assert cli_main([*IN_PROCESS_RUN, "--shadow-real-npu-bridge", script]) == 0
    assert "SIMULATED" in capsys.readouterr().out


def _seed_lines(text):
    return [line for line in text.splitlines() if line.startswith("SEED ")]


def _rewrites(line):
    match = re.search(r"rewrites (\d+)", line)
    return int(match.group(1)) if match else None


EXPECTED_SEED_LINES = {
    "seed_000_estimator.py": 4,
    "seed_000_session_keras.py": 4,
    "seed_002_mixed_compute.py": 3,
    "seed_003_mixed_precision.py": 2,
}


def _check_seed_output(name, lines):
    assert len(lines) == EXPECTED_SEED_LINES[name], lines
    counts = [_rewrites(line) for line in lines if _rewrites(line) is not None]
    assert counts and counts[-1] > 0 and counts == sorted(counts), lines
    if name == "seed_003_mixed_precision.py":
        assert "precision_mode allow_mix_precision" in lines[-1]


@pytest.mark.parametrize("name", SEED_SCRIPTS)
def test_seed_script_runs_under_npu_sim_run_with_npu_bridge_imports(name):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", os.path.join(SEED_DIR, name)],
                            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    _check_seed_output(name, _seed_lines(result.stdout))


@pytest.mark.parametrize("name", SEED_SCRIPTS)
def test_seed_script_runs_with_the_packages_own_import(name, tmp_path, capsys):
    with open(os.path.join(SEED_DIR, name), encoding="utf-8") as handle:
        text = handle.read()
    assert "from npu_bridge.npu_init import *" in text
    script = tmp_path / name
    script.write_text(text.replace("from npu_bridge.npu_init import *", "from npu_sim_bridge.npu_init import *"))
    try:
        with tf.Graph().as_default():
            try:
                run.run_script(script, alias=False)
            except SystemExit as stopped:  # seed 000's tf.app.run() exits, as it does on the real adapter
                assert stopped.code in (None, 0)
    finally:
        tf.compat.v1.mixed_precision.disable_mixed_precision_graph_rewrite()
        npu_init.disable_mixed_precision()
        for backend in (tf.compat.v1.keras.backend, old_keras_backend):  # the Keras sessions the seeds set
            backend.clear_session()
    assert "npu_bridge" not in sys.modules
    _check_seed_output(name, _seed_lines(capsys.readouterr().out))
