"""`npu-sim check` resolves names only: a process that calls it keeps TensorFlow 2 behaviour."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    import tensorflow as tf
    from npu_sim_bridge.api_check import check
    result = check([sys.argv[1]])
    assert result["summary"]["missing"] == 0, result
    assert result["summary"]["provided"] >= 3, result
    print("eager", tf.executing_eagerly(), "resource", tf.compat.v1.resource_variables_enabled(),
          "v2_tensorshape", tf.compat.v1.dimension_value(tf.TensorShape([3])[0]) == 3
          and not hasattr(tf.TensorShape([3])[0], "value"))
""")


def test_check_in_a_tf2_process_leaves_eager_and_resource_variables_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import tensorflow as tf\nfrom tensorflow.contrib.layers import batch_norm\n"
                      "from tensorflow.contrib import slim\nx = tf.placeholder(tf.float32)\nbatch_norm(x)\n")
    probe = tmp_path / "probe.py"
    probe.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(probe), str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eager True resource True v2_tensorshape True" in done.stdout, done.stdout
