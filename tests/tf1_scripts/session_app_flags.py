"""A Session training script in the TF 1.15 style: tf.app.run, tf.flags, tf.logging, tf.random_normal, tf.layers."""
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge
import tf1_helpers

flags = tf.flags
flags.DEFINE_integer("steps", 3, "training steps")
flags.DEFINE_float("learning_rate", 0.05, "learning rate")
FLAGS = flags.FLAGS


def main(unused_argv):
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.set_random_seed(0)
    features = tf.random_normal([16, 4], seed=1)
    labels = tf.reduce_sum(features, axis=1, keepdims=True)
    predictions = tf1_helpers.mlp(features)
    loss = tf.losses.mean_squared_error(labels, predictions) + tf.losses.get_regularization_loss()
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(loss, global_step=global_step)
    with tf.Session(config=npu_config_proto()) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(FLAGS.steps):
            sess.run(train_op)
        tf.logging.info("trained %d steps", FLAGS.steps)
        print("TF1 session global_step", sess.run(global_step), "dim_value", features.shape[1].value,
              "rewrites", len(npu_sim_bridge.recent_reports()))


if __name__ == "__main__":
    tf.app.run()
