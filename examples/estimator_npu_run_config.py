"""Estimator set up two ways: tf.estimator.Estimator with npu_run_config_init, and NPUEstimator with NPURunConfig.

Both train the same small regression model on generated data through the NpuOptimizer; a hook
prints the loss curve. NPURunConfig writes each of its arguments to the NpuOptimizer parameter_map
(precision_mode, mix_compile_mode, dump_config, ...; `sim_report_dir` is the simulator's own).
Run:  python examples/estimator_npu_run_config.py [--steps 60] [--report-dir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from npu_sim_bridge.npu_init import *  # noqa: E402,F401,F403  (tf is now tf.compat.v1, graph mode is on)

import npu_sim_bridge  # noqa: E402

tf.logging.set_verbosity(tf.logging.ERROR)


def input_fn():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 6)).astype(np.float32)
    y = (x @ rng.normal(size=(6, 1)) + 0.5).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512, seed=0).repeat().batch(32)


class LossCurveHook(tf.train.SessionRunHook):
    """Prints the loss every `every` steps."""

    def __init__(self, loss_name, every=10):
        self._loss_name, self._every, self._step = loss_name, every, 0

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(run_context.session.graph.get_tensor_by_name(self._loss_name))

    def after_run(self, run_context, run_values):
        if self._step % self._every == 0:
            print(f"  step {self._step:3d}  loss {run_values.results:.4f}")
        self._step += 1


def model_fn(features, labels, mode):
    hidden = tf.layers.dense(features, 16, activation=tf.nn.relu, name="hidden")
    predictions = tf.layers.dense(hidden, 1, name="out")
    loss = tf.identity(tf.losses.mean_squared_error(labels, predictions), name="train_loss")
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return NPUEstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[LossCurveHook("train_loss:0")])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--report-dir", default=None)
    args = parser.parse_args()
    report_dir = args.report_dir or tempfile.mkdtemp(prefix="npu_sim_report_")

    print("1. tf.estimator.Estimator(config=npu_run_config_init(run_config)), loss curve:")
    session_config = tf.ConfigProto(allow_soft_placement=True)
    custom_op = session_config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["sim_report_dir"].s = tf.compat.as_bytes(os.path.join(report_dir, "estimator"))
    run_config = tf.estimator.RunConfig(session_config=session_config, save_checkpoints_secs=60 * 60 * 24,
                                        model_dir=tempfile.mkdtemp(prefix="estimator_"))
    estimator = tf.estimator.Estimator(model_fn=model_fn, config=npu_run_config_init(run_config=run_config))
    estimator.train(input_fn, steps=args.steps)

    print("\n2. NPUEstimator(config=NPURunConfig(...)), loss curve:")
    config = NPURunConfig(model_dir=tempfile.mkdtemp(prefix="npu_estimator_"), precision_mode="allow_mix_precision",
                          save_checkpoints_steps=args.steps, sim_report_dir=os.path.join(report_dir, "npu_estimator"))
    print("   NpuOptimizer options written by NPURunConfig:",
          {k: v for k, v in config.npu_parameters.items() if k in ("precision_mode", "iterations_per_loop",
                                                                   "mix_compile_mode", "sim_report_dir")})
    npu_estimator = NPUEstimator(model_fn=model_fn, config=config)
    npu_estimator.train(input_fn, steps=args.steps)
    print(f"   global_step {npu_estimator.get_variable_value('global_step')}")

    reports = npu_sim_bridge.recent_reports()
    print(f"\nthe NpuOptimizer rewrote {len(reports)} graph(s); reports in {report_dir}:")
    for folder in sorted(os.listdir(report_dir)):
        print(f"  {folder}/: {len(os.listdir(os.path.join(report_dir, folder)))} files")
    print("\n" + max(reports, key=lambda report: report.nodes_before).to_text(max_nodes=8))


if __name__ == "__main__":
    main()
