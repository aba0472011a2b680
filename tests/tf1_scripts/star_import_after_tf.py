"""Run with plain `python`: `import tensorflow as tf` then the package's own star import, as migrated scripts do."""
import tensorflow as tf
from npu_sim_bridge.npu_init import *

import npu_sim_bridge

features = tf.placeholder(tf.float32, [None, 3])
output = tf.contrib.layers.fully_connected(features, 2, weights_initializer=tf.contrib.layers.xavier_initializer())
loss = tf.reduce_mean(tf.square(output))
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
with tf.Session(config=npu_config_proto()) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train_op, feed_dict={features: [[1.0, 2.0, 3.0]]})
print("STAR tf", type(tf).__name__, "eager", tf.executing_eagerly(), "has_contrib", hasattr(tf, "contrib"),
      "rewrites", len(npu_sim_bridge.recent_reports()))
