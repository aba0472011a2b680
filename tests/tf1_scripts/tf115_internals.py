"""TensorFlow 1.15 internals scripts import from tensorflow.python: freeze a graph, v1 control flow, checkpoints."""
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.python.tools import freeze_graph  # a submodule plain TensorFlow loads on `from ... import`
from tensorflow.python.tools import optimize_for_inference_lib
from tensorflow.python.framework import graph_util
from tensorflow.python.framework.graph_util import convert_variables_to_constants
from tensorflow.python.ops import array_ops, control_flow_ops
from tensorflow.python.util import nest
from tensorflow.python import pywrap_tensorflow
from tensorflow.python.data.experimental.ops import threadpool
from tensorflow.python.layers import core as layers_core
import tensorflow.python.training.checkpoint_management as checkpoint_management

x = tf.placeholder(tf.float32, [None, 3], name="x")
dense = layers_core.Dense(2, name="dense")
y = tf.identity(dense(x), name="y")
counter = control_flow_ops.while_loop(lambda i: i < 5, lambda i: i + 1, [tf.constant(0)])
sign = control_flow_ops.cond(tf.reduce_sum(x) > 0, lambda: tf.constant(1.0), lambda: tf.constant(-1.0))
check = control_flow_ops.Assert(tf.reduce_all(tf.is_finite(x)), [x])
stacked = array_ops.stack(array_ops.unstack(tf.constant([[1.0, 2.0], [3.0, 4.0]]), axis=0)[::-1])
dataset = threadpool.override_threadpool(tf.data.Dataset.range(3),
                                         threadpool.PrivateThreadPool(2, display_name="input"))
item = dataset.make_one_shot_iterator().get_next()

folder = tempfile.mkdtemp()
saver = tf.train.Saver()
feed = {x: np.ones((1, 3), np.float32)}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    expected = sess.run(y, feed)
    with tf.control_dependencies([check]):
        values = sess.run([counter, sign, stacked, item], feed)
    prefix = saver.save(sess, os.path.join(folder, "model.ckpt"))
    frozen = convert_variables_to_constants(sess, sess.graph_def, ["y"])
    pruned = graph_util.remove_training_nodes(frozen, protected_nodes=["y"])
reader = pywrap_tensorflow.NewCheckpointReader(prefix)
optimized = optimize_for_inference_lib.optimize_for_inference(pruned, ["x"], ["y"], tf.float32.as_datatype_enum)

with tf.Graph().as_default() as graph:
    tf.import_graph_def(optimized, name="")
    with tf.Session(graph=graph) as sess:
        frozen_value = sess.run("y:0", {"x:0": feed[x]})
print("INTERNALS frozen_variables", sum(node.op in ("VariableV2", "VarHandleOp") for node in frozen.node),
      "same_output", bool(np.allclose(frozen_value, expected)),
      "has_freeze_graph", callable(freeze_graph.freeze_graph))
print("INTERNALS control", int(values[0]), float(values[1]), values[2].tolist(), int(values[3]))
print("INTERNALS checkpoint", sorted(reader.get_variable_to_shape_map()),
      os.path.basename(checkpoint_management.latest_checkpoint(folder)))
print("INTERNALS nest", nest.is_sequence([1]), nest.is_sequence(1))
sys.stdout.flush()
