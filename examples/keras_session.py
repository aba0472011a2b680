"""Keras set up with set_keras_session_npu_config: fit a small classifier on generated data through the NpuOptimizer.

set_keras_session_npu_config(config) builds a Session with the NpuOptimizer and makes it the
Keras session; model.fit then trains through the rewrite. In TF1 graph mode Keras needs its
"legacy" optimizers: `tf.keras.optimizers.SGD` here is tf.compat.v1's, which is one.
Run:  python examples/keras_session.py [--epochs 8] [--report-dir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403  (tf is now tf.compat.v1, graph mode is on)

import npu_sim_bridge  # noqa: E402


def make_data(n=2048, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 16)).astype(np.float32)
    y = (np.sin(x[:, 0]) + x[:, 1] * x[:, 2] > 0).astype(np.float32)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--report-dir", default=None)
    args = parser.parse_args()
    report_dir = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

    config_proto = tf.ConfigProto()
    custom_op = config_proto.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["sim_report_dir"].s = tf.compat.as_bytes(report_dir)  # simulator extra
    npu_keras_sess = set_keras_session_npu_config(config=config_proto)

    tf.set_random_seed(0)
    x, y = make_data()
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(64, activation="relu", input_shape=(16,), name="hidden1"),
        tf.keras.layers.Dense(64, activation="relu", name="hidden2"),
        tf.keras.layers.Dense(1, activation="sigmoid", name="out"),
    ])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1, momentum=0.9), loss="binary_crossentropy",
                  metrics=["accuracy"])
    history = model.fit(x, y, epochs=args.epochs, batch_size=64, verbose=0)
    print("loss curve:")
    for epoch, (loss, accuracy) in enumerate(zip(history.history["loss"], history.history["accuracy"])):
        print(f"  epoch {epoch}  loss {loss:.4f}  accuracy {accuracy:.3f}")
    npu_keras_sess.close()

    reports = npu_sim_bridge.recent_reports()
    print(f"\nthe NpuOptimizer rewrote {len(reports)} graph(s); {len(os.listdir(report_dir))} report files in "
          f"{report_dir}")
    training = [report for report in reports if "hidden1/MatMul" in report.nodes]
    print("\n" + max(training, key=lambda report: report.nodes_before).to_text(max_nodes=8))


if __name__ == "__main__":
    main()
