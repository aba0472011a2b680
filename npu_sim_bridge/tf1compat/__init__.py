"""TensorFlow 1.15's API on TensorFlow 2.15 for unchanged TF1 scripts: tf.compat.v1 + tf.contrib + TF 1.15 internals.

No NPU knowledge lives here; npu_sim_bridge's launcher (cli/run.py) turns it on for `npu-sim run`.

  view.py        the module objects a TF1 script sees: `tensorflow`, tensorflow.python (TF 1.15 names kept)
  hook.py        the import hook: the script's own `import tensorflow` gets the view; libraries the real module
  internals.py   TF 1.15 names inside tensorflow.python that TensorFlow 2.15 moved or dropped
  contrib.py     tf.contrib, module by module (slim.py: tf-slim; optimizers.py; contrib_more.py; hparams.py)
  mnist.py       tensorflow.examples.tutorials.mnist.input_data from local files
  threadpool.py  tensorflow.python.data.experimental.ops.threadpool
"""

from npu_sim_bridge.tf1compat.errors import TF1AttributeError, TF1CompatWarning, TF1ContribError
from npu_sim_bridge.tf1compat.hook import (disable_tf1_api, enable_tf1_api, is_user_code, tf1_api,
                                           tf1_api_enabled)
from npu_sim_bridge.tf1compat.view import tf1_module, tf1_submodule

__all__ = ["TF1AttributeError", "TF1CompatWarning", "TF1ContribError", "disable_tf1_api", "enable_tf1_api",
           "is_user_code", "tf1_api", "tf1_api_enabled", "tf1_module", "tf1_submodule"]
