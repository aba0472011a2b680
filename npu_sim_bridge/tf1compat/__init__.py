"""TensorFlow 1.15's API on TensorFlow 2.15 for unchanged TF1 scripts: tf.compat.v1 + tf.contrib + TF 1.15 internals.

No NPU knowledge lives here; npu_sim_bridge's launcher (cli/run.py) turns it on for `npu-sim run`, and
registers what only the simulator has (tf.contrib.mixed_precision: contrib.register_module).

  view.py          the module objects a TF1 script sees: `tensorflow`, tensorflow.python and Keras (TF 1.15 names)
  hook.py          the import hook: the script's own `import tensorflow` (or `tensorflow_core`, TF 1.15's own package
                   name) gets the view; libraries the real module
  plumbing.py      the files of that plumbing, whose frames tracebacks and warnings leave out
  internals.py     TF 1.15 names inside tensorflow.python that TensorFlow 2.15 moved or dropped
  keras_compat.py  the same for Keras (tensorflow.python.keras, tf.keras); keras_attributes.py: TF 1.15's private
                   Keras attributes (Layer._layers, Conv._convolution_op, ...)
  contrib.py       tf.contrib, module by module; slim.py (tf-slim), contrib_more.py and contrib_misc.py (the
                   smaller modules), contrib_estimator.py (tfprof, estimator), optimizers.py, scipy_optimizer.py,
                   rnn_cells.py, rnn_more.py, seq2seq.py (TF1 Helpers), legacy_seq2seq.py, hparams.py,
                   threadpool.py, all_reduce.py, learn.py (Experiment), graph_matcher.py, odeint.py, bucketing.py,
                   graph_editor.py / graph_editor_edit.py / graph_editor_copy.py (tf.contrib.graph_editor)
  graph_transforms.py, graph_transforms_fold.py   tensorflow.tools.graph_transforms.TransformGraph
  mnist.py         tensorflow.examples.tutorials.mnist.input_data from local files
  contrib_paths.py deep tf.contrib paths TF 1.15 scripts import (tpu_ops, audio_ops, tensor_util, datasets.base, ...)
  packages.py      TensorFlow's companion packages (tensorflow_hub, ...): the pip command that works with TF 2.15
  model_pruning.py tf.contrib.model_pruning: magnitude masks on TensorFlow 1.15's schedule
  resolve.py       what an import statement or attribute chain gives a script, found by running it (`npu-sim check`)
"""

from npu_sim_bridge.tf1compat.errors import TF1AttributeError, TF1CompatWarning, TF1ContribError
from npu_sim_bridge.tf1compat.hook import (disable_tf1_api, enable_tf1_api, is_user_code, tf1_api,
                                           tf1_api_enabled)
from npu_sim_bridge.tf1compat.view import tf1_module, tf1_submodule

__all__ = ["TF1AttributeError", "TF1CompatWarning", "TF1ContribError", "disable_tf1_api", "enable_tf1_api",
           "is_user_code", "tf1_api", "tf1_api_enabled", "tf1_module", "tf1_submodule"]
