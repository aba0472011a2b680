"""A TF 1.15-era script using the newer npu_bridge names trains unchanged under `npu-sim run` (subprocess)."""

import os
import re
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO_ROOT, "tests", "npu_scripts", "npu_names_train.py")


def test_script_with_gelu_dynamic_rnn_dropout_lars_and_npu_optimizer_trains_under_npu_sim_run():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", SCRIPT], capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    first, last = map(float, re.search(r"loss first=([\d.]+) last=([\d.]+)", result.stdout).groups())
    assert last < 0.6 * first  # it learns through the fused RNN, Gelu, LARS and the loss-scaled NPUOptimizer
    assert "gelu op=Gelu list=gray dtype=float16 placement=device" in result.stdout
    assert "choice picked=2" in result.stdout
    assert "dropout call=npu_sim_bridge.runtime.npu_convert_dropout.dropout_call" in result.stdout
    assert "auto_tune_mode='RL,GA' is from an older npu_bridge" in result.stderr and "use aoe_mode" in result.stderr
