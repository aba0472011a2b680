"""TF 1.15's private Keras attributes under `npu-sim run`: a TCN walking `_layers`, Conv subclasses on `_convolution_op`.

The script (tests/tf1_scripts/keras_private_attributes.py) runs in a subprocess: the attributes are added to
Keras's classes only for TF1 scripts, never to this pytest process's Keras.
"""

import os
import re
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_scripts", "keras_private_attributes.py")


@pytest.fixture(name="lines", scope="module")
def lines_fixture():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "npu_sim_bridge", "run", SCRIPT], capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return {line.split()[1]: line for line in result.stdout.splitlines() if line.startswith("KERAS ")}


def _losses(line):
    first, last = (float(re.search(rf"{key} (\S+)", line).group(1)) for key in ("loss_first", "loss_last"))
    return first, last


def test_tcn_layers_walk_their_tracked_sublayers(lines):
    # TCN's blocks were set as attributes and found through _layers; each block's own `self._layers = []` list
    # holds its convolution, whose weights are tracked: 2 blocks x (causal conv + 1x1 conv) x 2 + conv + dense.
    assert lines["blocks"] == "KERAS blocks residual_block_1 residual_block_2 sublayers CausalConv1D Activation " \
                              "variables 12"


def test_model_with_tf115_internals_trains_in_a_session_and_with_fit(lines):
    first, last = _losses(lines["session"])
    assert last < first / 2
    first, last = _losses(lines["fit"])
    assert last < first / 2
    assert lines["fit"].endswith("depths 5 model_layers 7")  # _layers_by_depth; _layers: 2 inputs + 5 layers


def test_assigned_convolution_op_is_what_the_layer_calls_and_call_fn_args_names_the_arguments(lines):
    assert lines["masked_only_bias"] == "KERAS masked_only_bias True call_fn_args ('inputs', 'training')"
    assert "_layers_by_depth" in lines["unbuilt_depths"] and "walk model.layers instead" in lines["unbuilt_depths"]
