"""A loss-scaled TF1 training loop: NPULossScaleOptimizer, ExponentialUpdateLossScaleManager, allow_mix_precision."""
import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *
from npu_bridge.estimator.npu.npu_loss_scale_manager import ExponentialUpdateLossScaleManager
from npu_bridge.estimator.npu.npu_loss_scale_optimizer import NPULossScaleOptimizer

import npu_sim_bridge

tf.set_random_seed(0)
x = tf.placeholder(tf.float32, [None, 8], name="x")
y = tf.placeholder(tf.float32, [None, 1], name="y")
net = tf.layers.dense(x, 16, activation=tf.nn.relu)
loss = tf.reduce_mean(tf.square(tf.layers.dense(net, 1) - y))
global_step = tf.train.get_or_create_global_step()
manager = ExponentialUpdateLossScaleManager(init_loss_scale=2 ** 18, incr_every_n_steps=1000,
                                            decr_every_n_nan_or_inf=1, decr_ratio=0.5)
train_op = NPULossScaleOptimizer(tf.train.AdamOptimizer(0.01), manager).minimize(loss, global_step=global_step)

config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
config = npu_config_proto(config_proto=config)

rng = np.random.RandomState(4)
feed = {x: rng.rand(32, 8).astype(np.float32)}
feed[y] = feed[x].sum(axis=1, keepdims=True)
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    losses = []
    for _ in range(14):
        losses.append(sess.run([train_op, loss], feed_dict=feed)[1])
    step, scale = sess.run([global_step, manager.get_loss_scale()])
print("TF1 loss_scale steps_run", len(losses), "global_step", step, "final_scale", scale,
      "loss_first", round(float(losses[0]), 3), "loss_last", round(float(losses[-1]), 3),
      "rewrites", len(npu_sim_bridge.recent_reports()))
