"""TF1 Session set up with init_resource: train a small classifier on generated data through the NpuOptimizer.

The migrated-script way: build a ConfigProto naming NpuOptimizer, hand it to init_resource (which
adds what npu_bridge adds and opens the Session), train, then shutdown_resource and close_session.
Run:  python examples/session_init_resource.py [--steps 80] [--report-dir DIR]
The same script with `from npu_bridge.npu_init import *` runs unchanged with `npu-sim run`.
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403  (tf is now tf.compat.v1, graph mode is on)

import npu_sim_bridge  # noqa: E402


def make_data(n=1024, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.argmax(x @ rng.normal(size=(8, 3)), axis=1).astype(np.int64)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--report-dir", default=None)
    args = parser.parse_args()
    report_dir = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

    session_config = tf.ConfigProto()
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["sim_report_dir"].s = tf.compat.as_bytes(report_dir)  # simulator extra
    (npu_sess, npu_shutdown) = init_resource(config=session_config)

    tf.set_random_seed(0)
    x = tf.placeholder(tf.float32, [None, 8], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    hidden = tf.layers.dense(x, 32, activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, 3, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    train_op = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)

    data_x, data_y = make_data()
    npu_sess.run(tf.global_variables_initializer())
    print("loss curve:")
    for step in range(args.steps):
        batch = slice((step * 64) % 1024, (step * 64) % 1024 + 64)
        _, value = npu_sess.run([train_op, loss], {x: data_x[batch], y: data_y[batch]})
        if step % 10 == 0 or step == args.steps - 1:
            print(f"  step {step:3d}  loss {value:.4f}")
    print(f"accuracy {npu_sess.run(accuracy, {x: data_x, y: data_y}):.3f}")
    shutdown_resource(npu_sess, npu_shutdown)
    close_session(npu_sess)

    reports = npu_sim_bridge.recent_reports()
    print(f"\nthe NpuOptimizer rewrote {len(reports)} graph(s); reports (JSON + text) in {report_dir}:")
    for name in sorted(os.listdir(report_dir))[:6]:
        print("  " + name)
    training = max(reports, key=lambda report: report.nodes_before)
    print("\n" + training.to_text(max_nodes=12))


if __name__ == "__main__":
    main()
