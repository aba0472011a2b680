"""Mixed compute (seed 002): the manual's three snippets as they stand, with the package's npu_init import.

1. Estimator mode: NPURunConfig(mix_compile_mode=True, iterations_per_loop=1) (the manual elides the
   model; a small regression model stands in).
2. sess.run mode: the ConfigProto with mix_compile_mode on, remapping and memory_optimization off.
3. without_npu_compile_scope: tf.add and tf.multiply stay on the host.
The only additions are marked "simulator extra": where the rewrite's reports go, and printing them.
Run:  python examples/mixed_compute.py [--report-dir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--report-dir", default=None)
args = parser.parse_args()
# simulator extra: reports of every rewrite go here (the environment form of option sim_report_dir)
os.environ["NPU_SIM_REPORT_DIR"] = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

import numpy as np  # noqa: E402
import npu_sim_bridge  # noqa: E402

# --- 1. Estimator mode ------------------------------------------------------------------------------
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403
session_config=tf.ConfigProto(allow_soft_placement=True)
config = NPURunConfig(session_config=session_config, mix_compile_mode=True, iterations_per_loop=1)


def model_fn(features, labels, mode):  # elided in the manual
    predictions = tf.layers.dense(features, 1, name="dense")
    loss = tf.losses.mean_squared_error(labels, predictions)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return NPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():  # elided in the manual
    x = np.random.default_rng(0).random((64, 3), dtype=np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).repeat().batch(16)


estimator = NPUEstimator(model_fn=model_fn, config=config.replace(model_dir=tempfile.mkdtemp(prefix="mixed_")))
estimator.train(input_fn, steps=20)
print(f"1. NPUEstimator with mix_compile_mode trained to global_step {estimator.get_variable_value('global_step')}")

# --- 2. sess.run mode -------------------------------------------------------------------------------
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403
config = tf.ConfigProto(allow_soft_placement=True)
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["mix_compile_mode"].b = True
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF
print("2. sess.run ConfigProto with mix_compile_mode built")

# --- 3. ops kept on the host ------------------------------------------------------------------------
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403

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

# --- simulator extra: what the rewrite decided ---------------------------------------------------
report = npu_sim_bridge.last_report()
scoped = [op.name for op in tf.get_default_graph().get_operations() if "_without_npu_compile" in op.node_def.attr]
print(f"\n3. ops built in without_npu_compile_scope: {', '.join(scoped)}; what the NpuOptimizer got and decided "
      "(Grappler's own optimizers run first and may already have folded x*1 and +0 away):")
for node in report.nodes.values():
    print(f"   {node.name:24s} {node.op:14s} {node.placement or '':7s} {node.geop or '':12s} {node.reason}")
print(f"\n{len(npu_sim_bridge.recent_reports())} reports (JSON + text) in {os.environ['NPU_SIM_REPORT_DIR']}")
