"""A TF1 queue-runner input pipeline built inside npu_scope.without_npu_compile_scope, trained with mix_compile_mode."""
import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge

tf.set_random_seed(0)
data = np.random.RandomState(2).rand(40, 3).astype(np.float32)
targets = data.sum(axis=1, keepdims=True)
with npu_scope.without_npu_compile_scope():
    example, target = tf.train.slice_input_producer([tf.constant(data), tf.constant(targets)], shuffle=True, seed=3)
    batch_x, batch_y = tf.train.batch([example, target], batch_size=8, num_threads=1, capacity=32)

weights = tf.get_variable("weights", [3, 1], initializer=tf.zeros_initializer())
bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
loss = tf.reduce_mean(tf.square(tf.matmul(batch_x, weights) + bias - batch_y))
train_op = tf.train.GradientDescentOptimizer(0.2).minimize(loss)

config = tf.ConfigProto(allow_soft_placement=True)
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["mix_compile_mode"].b = True
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
config.graph_options.rewrite_options.memory_optimization = RewriterConfig.OFF

with tf.Session(config=config) as sess:
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    losses = [sess.run([train_op, loss])[1] for _ in range(6)]
    coord.request_stop()
    coord.join(threads)

decisions = npu_sim_bridge.last_report().nodes.values()
scoped = [node for node in decisions if "without_npu_compile_scope" in node.reason]
print("TF1 queue loss_first", round(float(losses[0]), 4), "loss_last", round(float(losses[-1]), 4),
      "host_scoped", len(scoped), "all_host", all(node.placement == "host" for node in scoped),
      "rewrites", len(npu_sim_bridge.recent_reports()))
