"""What `npu-sim run` gives a TF1 script: argv, __name__, sys.path[0], the TF1 `tf`, exit status, tracebacks.

Modes (argv[1]): exit=N exits with status N; raise calls a helper that uses a TensorFlow 2-only name.
"""
import sys

import keras.src.backend
import tensorflow as tf

import tf1_helpers

print("PROBE argv", sys.argv[1:], "name", __name__, "path0", sys.path[0])
print("PROBE tf", tf.__name__, type(tf).__name__, "helper_same_tf", tf1_helpers.tf is tf,
      "eager", tf.executing_eagerly(), "has_session", hasattr(tf, "Session"))
print("PROBE library_tf", keras.src.backend.tf.__name__, "sys_modules_tf", type(sys.modules["tensorflow"]).__name__)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode.startswith("exit="):
    sys.exit(int(mode[len("exit="):]))
if mode == "raise":
    tf1_helpers.uses_a_tensorflow2_name()
