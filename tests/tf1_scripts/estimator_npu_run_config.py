"""An Estimator with npu_run_config_init, written for TensorFlow 1.15 (tf.layers, tf.losses, tf.train, tf.logging)."""
import tempfile

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge

tf.logging.set_verbosity(tf.logging.WARN)


def input_fn():
    x = np.random.RandomState(1).rand(32, 3).astype(np.float32)
    y = (x.sum(axis=1) > 1.5).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(8)
    return dataset.make_one_shot_iterator().get_next()


def model_fn(features, labels, mode, params):
    net = tf.layers.dense(features["x"], 8, activation=tf.nn.relu,
                          kernel_initializer=tf.contrib.layers.xavier_initializer())
    logits = tf.layers.dense(net, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf.train.MomentumOptimizer(params["learning_rate"], 0.9)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


with tempfile.TemporaryDirectory(prefix="tf1_estimator_") as model_dir:
    session_config = tf.ConfigProto(allow_soft_placement=True)
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    run_config = tf.estimator.RunConfig(model_dir=model_dir, session_config=session_config,
                                        save_checkpoints_secs=60 * 60, tf_random_seed=0)
    estimator = tf.estimator.Estimator(model_fn=model_fn, params={"learning_rate": 0.1},
                                       config=npu_run_config_init(run_config=run_config))
    estimator.train(input_fn=input_fn, steps=3)
    print("TF1 estimator global_step", estimator.get_variable_value("global_step"),
          "rewrites", len(npu_sim_bridge.recent_reports()))
