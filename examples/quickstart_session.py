"""Quickstart: a TF1 Session script configured for Ascend's NpuOptimizer, run on plain TensorFlow.

The ConfigProto below is written exactly as migrated scripts write it. Importing npu_sim_bridge
registers NpuOptimizer with Grappler, so the Session picks the rewrite up with no other change.
Run:  python examples/quickstart_session.py [--steps 60] [--report-dir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.npu_init import npu_config_proto  # noqa: E402

tf.compat.v1.disable_eager_execution()


def make_data(n=1024, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    w = rng.normal(size=(8, 3)).astype(np.float32)
    y = np.argmax(x @ w + 0.1 * rng.normal(size=(n, 3)), axis=1).astype(np.int64)
    return x, y


def build_model():
    x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
    y = tf.compat.v1.placeholder(tf.int64, [None], name="y")
    hidden = tf.compat.v1.layers.dense(x, 32, activation=tf.nn.relu, name="hidden")
    logits = tf.compat.v1.layers.dense(hidden, 3, name="logits")
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32), name="accuracy")
    train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    return x, y, loss, accuracy, train_op


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--report-dir", default=None)
    args = parser.parse_args()
    report_dir = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

    # --- as in a migrated script -------------------------------------------------------------
    session_config = tf.compat.v1.ConfigProto()
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    # --- simulator extra: where the rewrite's reports go ---------------------------------------
    custom_op.parameter_map["sim_report_dir"].s = tf.compat.as_bytes(report_dir)
    # As the adapter's manual asks: remapping and memory optimization off, soft placement on.
    session_config = npu_config_proto(config_proto=session_config)

    tf.compat.v1.set_random_seed(0)
    x, y, loss, accuracy, train_op = build_model()
    data_x, data_y = make_data()
    with tf.compat.v1.Session(config=session_config) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for step in range(args.steps):
            batch = slice((step * 64) % 1024, (step * 64) % 1024 + 64)
            _, value = sess.run([train_op, loss], {x: data_x[batch], y: data_y[batch]})
            if step % 10 == 0 or step == args.steps - 1:
                print(f"step {step:3d}  loss {value:.4f}")
        print(f"accuracy {sess.run(accuracy, {x: data_x, y: data_y}):.3f}")

    reports = [r for r in npu_sim_bridge.recent_reports() if not r.rerun]
    print(f"\nNpuOptimizer rewrote {len(reports)} graph(s); reports in {report_dir}:")
    for name in sorted(os.listdir(report_dir)):
        print("  " + name)
    biggest = max(reports, key=lambda r: r.nodes_before)
    print()
    print(biggest.to_text(max_nodes=15))
    print_next_steps(biggest, report_dir)


def print_next_steps(report, report_dir):
    """What to open next: the training graph's picture, the TensorBoard run, and the same on one's own script."""
    picture = os.path.splitext(report.published.report)[0] + ".html"
    print("Next:")
    print(f"  open {picture}")
    print("      the picture of the training graph after the rewrite (any browser, works offline)")
    print(f"  tensorboard --logdir {os.path.join(report_dir, 'tensorboard')}")
    print("      the graphs before and after the rewrite (a run each), GeOps as boxes that open")
    print("  npu-sim check your_script.py && npu-sim run your_script.py")
    print("      the same on your own TF1 script (docs/migrate.md)")


if __name__ == "__main__":
    main()
