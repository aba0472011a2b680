"""Loss scaling with overflow skipping under allow_mix_precision: the scale settles, skipped steps change nothing.

The model trains with NPULossScaleOptimizer and an ExponentialUpdateLossScaleManager that starts
at 2**32, as many Ascend ModelZoo scripts do. Under allow_mix_precision the MatMul gradients run in
(emulated) float16, where anything above 65504 becomes inf: the first steps overflow, are skipped
(weights and global_step unchanged) and every 2 overflow steps halve the scale, until gradients fit
and training proceeds; after 20 finite steps in a row the scale doubles again.
Run:  python examples/loss_scaling.py [--steps 120] [--report-dir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403  (tf is now tf.compat.v1, graph mode is on)

import npu_sim_bridge  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--report-dir", default=None)
    args = parser.parse_args()
    report_dir = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

    rng = np.random.default_rng(0)
    data_x = rng.normal(size=(1024, 16)).astype(np.float32)
    data_y = np.argmax(data_x @ rng.normal(size=(16, 4)), axis=1).astype(np.int64)

    tf.set_random_seed(0)
    x = tf.placeholder(tf.float32, [None, 16], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    hidden = tf.layers.dense(x, 64, activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, 4, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
    global_step = tf.train.get_or_create_global_step()

    manager = ExponentialUpdateLossScaleManager(init_loss_scale=2 ** 32, incr_every_n_steps=20,
                                                decr_every_n_nan_or_inf=2, decr_ratio=0.5)
    optimizer = NPULossScaleOptimizer(tf.train.MomentumOptimizer(0.05, 0.9), manager)
    train_op = optimizer.minimize(loss, global_step=global_step)
    loss_scale = manager.get_loss_scale()

    config = tf.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["sim_report_dir"].s = tf.compat.as_bytes(report_dir)  # simulator extra
    skipped = 0
    print(" step  loss      loss scale       global_step  result")
    with tf.Session(config=npu_config_proto(config_proto=config)) as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(args.steps):
            batch = slice((step * 64) % 1024, (step * 64) % 1024 + 64)
            scale = sess.run(loss_scale)
            _, finite, value = sess.run([train_op, optimizer.is_overall_finite, loss],
                                        {x: data_x[batch], y: data_y[batch]})
            skipped += not finite
            if step < 12 or step % 10 == 0 or step == args.steps - 1:
                print(f" {step:4d}  {value:.4f}  {scale:14.1f}  {sess.run(global_step):11d}  "
                      f"{'applied' if finite else 'SKIPPED (overflow)'}")
        print(f"\n{skipped} of {args.steps} steps overflowed and were skipped; final loss scale {sess.run(loss_scale)}")
    print(f"{len(npu_sim_bridge.recent_reports())} rewrites, reports in {report_dir}")


if __name__ == "__main__":
    main()
