"""Seed 002 (mixed compute), its three snippets pasted as they stand: Estimator, sess.run config, npu_scope."""
import tempfile

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge

# --- Estimator mode (snippet 1) -------------------------------------------------------------------
from npu_bridge.npu_init import *
session_config=tf.ConfigProto(allow_soft_placement=True)
config = NPURunConfig(session_config=session_config, mix_compile_mode=True, iterations_per_loop=1)


# elided: model_fn, input_fn and the training call
def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1, name="dense")
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return NPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.random.RandomState(0).rand(16, 3).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(8)


config = config.replace(model_dir=tempfile.mkdtemp(prefix="seed002_"))
estimator = NPUEstimator(model_fn=model_fn, config=config)
estimator.train(input_fn, steps=2)
print("SEED 002 NPUEstimator mix_compile_mode global_step", estimator.get_variable_value("global_step"),
      "rewrites", len(npu_sim_bridge.recent_reports()))

# --- sess.run mode (snippet 2) --------------------------------------------------------------------
import tensorflow as tf
from npu_bridge.npu_init import *
config = tf.ConfigProto(allow_soft_placement=True)
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["mix_compile_mode"].b = True
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
print("SEED 002 sess.run config mix_compile_mode", custom_op.parameter_map["mix_compile_mode"].b)

# --- without_npu_compile_scope (snippet 3) ---------------------------------------------------------
import tensorflow as tf
from npu_bridge.npu_init import *

X = tf.random_normal([2,])
Y = tf.random_normal([2,])

with npu_scope.without_npu_compile_scope():
    pred = tf.add(tf.multiply(X, 1.), 0.)  # tf.add和tf.multiply指定为不下沉算子

cost = tf.reduce_sum(tf.abs(pred-Y))

config = tf.ConfigProto(allow_soft_placement=True)
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["mix_compile_mode"].b = True
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF

with tf.Session(config=config) as sess:
    print(sess.run(cost))
print("SEED 002 without_npu_compile_scope attr", pred.op.get_attr("_without_npu_compile"),
      "rewrites", len(npu_sim_bridge.recent_reports()))
