"""Seed 000 (setting the precision mode), Estimator and init_resource snippets, pasted as they stand.

main() holds the three Estimator snippets; the __main__ block is the seed's init_resource snippet,
which ends in tf.app.run() (so, as on the real adapter, the shutdown lines after it never run).
"""
import tempfile
import types

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge

# elided: the script's flags, distribution strategy, model function and input function
flags_obj = types.SimpleNamespace(model_dir=None)
distribution_strategy = None


def model_function(features, labels, mode):
    logits = tf.layers.dense(features["x"], 2, name="dense")
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = np.random.RandomState(0).rand(16, 4).astype(np.float32)
    y = (x[:, 0] > 0.5).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8)


def train(classifier, label):
    classifier.train(input_fn, steps=2)
    print("SEED 000", label, "global_step", classifier.get_variable_value("global_step"),
          "rewrites", len(npu_sim_bridge.recent_reports()))


def main(_):
    flags_obj.model_dir = tempfile.mkdtemp(prefix="seed000_a_")
    session_config = tf.ConfigProto(allow_soft_placement=True)
    run_config = tf.estimator.RunConfig(
        train_distribute=distribution_strategy, session_config=session_config, save_checkpoints_secs=60*60*24)
    classifier = tf.estimator.Estimator(
        model_fn=model_function, model_dir=flags_obj.model_dir, config=npu_run_config_init(run_config=run_config))
    train(classifier, "estimator npu_run_config_init(plain)")

    flags_obj.model_dir = tempfile.mkdtemp(prefix="seed000_b_")
    session_config = tf.ConfigProto(allow_soft_placement=True)
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = 'NpuOptimizer'
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    run_config = tf.estimator.RunConfig(
        train_distribute=distribution_strategy, session_config=session_config, save_checkpoints_secs=60*60*24)
    classifier = tf.estimator.Estimator(
        model_fn=model_function, model_dir=flags_obj.model_dir, config=npu_run_config_init(run_config=run_config))
    train(classifier, "estimator npu_run_config_init(allow_soft_placement + NpuOptimizer)")

    flags_obj.model_dir = tempfile.mkdtemp(prefix="seed000_c_")
    session_config = tf.ConfigProto()
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = 'NpuOptimizer'
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    run_config = tf.estimator.RunConfig(
        train_distribute=distribution_strategy, session_config=session_config, save_checkpoints_secs=60*60*24)
    classifier = tf.estimator.Estimator(
        model_fn=model_function, model_dir=flags_obj.model_dir, config=npu_run_config_init(run_config=run_config))
    train(classifier, "estimator npu_run_config_init(NpuOptimizer)")
    print("SEED 000 main done")


if __name__ == '__main__':
    session_config = tf.ConfigProto()
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    (npu_sess, npu_shutdown) = init_resource(config=session_config)
    tf.app.run()
    shutdown_resource(npu_sess, npu_shutdown)
    close_session(npu_sess)
