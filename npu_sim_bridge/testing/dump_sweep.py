"""Dumps and compare over the model sweep: train a model with enable_dump in float32 and mixed precision, check
every op that ran has its tensors dumped at each step asked for, and find the first divergent op.

For a Session, "ran" is read from TensorFlow's own step stats (RunOptions FULL_TRACE), which list the
nodes the executor ran inside the GeOp bodies: an independent account of what each step computed, so
a dump that misses a tensor of an op that ran (or writes one of a branch that did not) shows. For an
Estimator (no step stats through MonitoredSession) the dump's own accounting is checked: every
listed tensor has a file or a reason that is not "lost". float32 is the simulation without the
precision pass (the Ascend modes keep Conv2D in float16 even under force_fp32).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

import numpy as np
import tensorflow as tf

from npu_sim_bridge.dumps import compare_dumps, find_dumps
from npu_sim_bridge.testing.models import ModelGraph

_v1 = tf.compat.v1
MODES = {
    "float32": {"sim_passes": "fusion,placement,partition,dump"},
    "mixed": {"precision_mode": "allow_mix_precision"},
}
EXPLAINED = ("branch not taken", "step not asked for")   # reasons for a missing file that are not a lost write


@dataclasses.dataclass
class DumpCheck:
    """One dumped training run: what the training graph's manifest lists and what each step wrote."""

    model: str
    runner: str
    mode: str
    root: str
    listed: int = 0
    written: dict = dataclasses.field(default_factory=dict)        # step -> tensors with a file
    missing: dict = dataclasses.field(default_factory=dict)        # step -> {reason kind: count}
    ran_not_dumped: dict = dataclasses.field(default_factory=dict)  # step -> [op] (Session: from step stats)
    dumped_ops_ran: dict = dataclasses.field(default_factory=dict)  # step -> ops of the manifest that ran
    losses: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost(self) -> dict:
        """step -> missing files whose reason is not a branch not taken or a step not asked for."""
        return {step: {kind: count for kind, count in kinds.items() if not kind.startswith(EXPLAINED)}
                for step, kinds in self.missing.items()}


def npu_config(mode: str, dump_path: str, dump_step: str = "0|1", dump_mode: str = "output",
               **extra) -> _v1.ConfigProto:
    """A Session config naming NpuOptimizer with dumps on, in `mode` (a MODES key)."""
    config = _v1.ConfigProto(allow_soft_placement=True)
    custom = config.graph_options.rewrite_options.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    values = {**MODES[mode], "enable_dump": True, "dump_path": dump_path, "dump_step": dump_step,
              "dump_mode": dump_mode, **extra}
    for key, value in values.items():
        if isinstance(value, bool):
            custom.parameter_map[key].b = value
        else:
            custom.parameter_map[key].s = str(value).encode()
    return config


def training_dump(root: str):
    """The graph dump of the training step: of those listing the most tensors, the one with the most steps
    written (an Estimator's first step fetches more than the others, so TensorFlow runs it as its own graph)."""
    dumps = [dump for dump in find_dumps(root) if dump.steps()]
    if not dumps:
        raise AssertionError(f"no graph dump under {root} wrote a step")
    return max(dumps, key=lambda dump: (len(dump.tensors), len(dump.steps())))


def session_dump(name: str, build: Callable[[], ModelGraph], mode: str, root: str, steps: int = 2,
                 dump_step: str = "0|1", model: ModelGraph | None = None) -> DumpCheck:
    """Train `steps` Session steps with dumps on; trace every step to learn which ops ran."""
    began = time.perf_counter()
    os.makedirs(root, exist_ok=True)
    model = model or build()
    check = DumpCheck(name, "session", mode, root)
    ran: dict[int, set] = {}
    with _v1.Session(graph=model.graph, config=npu_config(mode, root, dump_step)) as sess:
        sess.run(model.init_op)
        for step in range(steps):
            metadata = _v1.RunMetadata()
            loss, _ = sess.run([model.loss, model.train_op], model.feed(np.random.default_rng(step)),
                               options=_v1.RunOptions(trace_level=_v1.RunOptions.FULL_TRACE), run_metadata=metadata)
            check.losses.append(float(loss))
            ran[step] = {node.node_name for device in metadata.step_stats.dev_stats for node in device.node_stats}
    _account(check, training_dump(root), ran)
    check.seconds = time.perf_counter() - began
    return check


def estimator_dump(name: str, model_fn, input_fn, mode: str, root: str, steps: int = 3,
                   dump_step: str = "0|1") -> DumpCheck:
    """Train `steps` Estimator steps with dumps on (the session config of a RunConfig, as scripts set it)."""
    began = time.perf_counter()
    os.makedirs(root, exist_ok=True)
    run_config = tf.estimator.RunConfig(session_config=npu_config(mode, root, dump_step), tf_random_seed=0,
                                        model_dir=os.path.join(root, "model_dir"), save_checkpoints_steps=None,
                                        save_checkpoints_secs=None, log_step_count_steps=None,
                                        save_summary_steps=10 ** 9)
    estimator = tf.compat.v1.estimator.Estimator(model_fn=model_fn, config=run_config)
    estimator.train(input_fn, steps=steps)
    check = DumpCheck(name, "estimator", mode, root)
    _account(check, training_dump(root), None)
    check.seconds = time.perf_counter() - began
    return check


def _account(check: DumpCheck, dump, ran) -> None:
    check.listed = len(dump.tensors)
    for step in dump.steps():
        grouped = dump.missing(step)
        check.missing[step] = {}
        for reason, entries in grouped.items():
            kind = reason.split(":", 1)[0]
            check.missing[step][kind] = check.missing[step].get(kind, 0) + len(entries)
        check.written[step] = check.listed - sum(len(entries) for entries in grouped.values())
        if ran is None or step not in ran:
            continue
        ops_ran = {entry["op"] for entry in dump.tensors if entry["op"] in ran[step]}
        check.dumped_ops_ran[step] = len(ops_ran)
        # an op that ran has a file for each tensor, but a Switch's port into a branch not taken
        check.ran_not_dumped[step] = sorted({entry["op"] for entry in dump.tensors
                                             if entry["op"] in ops_ran and not dump.turns(step, entry)
                                             and not dump.why_missing(step, entry).startswith("branch not taken")})


def compare_modes(reference: DumpCheck, other: DumpCheck):
    """`npu-sim compare` of two runs' dumps (reference = A): the CompareResult."""
    return compare_dumps(reference.root, other.root)


# --------------------------------------------------------------------------- Estimator model functions
def cnn_model_fn(features, labels, mode, params=None):
    """The sweep's TF1 batch-norm CNN as an Estimator model_fn: batch norm behind a `training` tensor
    (placeholder_with_default, so the conds stay in the graph as in scripts that feed it) and a tf.cond
    dropout, UPDATE_OPS before the train op."""
    training = _v1.placeholder_with_default(mode == tf.estimator.ModeKeys.TRAIN, [], name="is_training")
    x = features
    for width in (8, 16):
        x = _v1.layers.conv2d(x, width, 3, padding="same", use_bias=False)
        x = _v1.layers.batch_normalization(x, training=training)
        x = _v1.layers.max_pooling2d(tf.nn.relu(x), 2, 2)
    x = _v1.layers.dense(_v1.layers.flatten(x), 32, activation=tf.nn.relu)
    x = tf.cond(training, lambda: tf.nn.dropout(x, rate=0.25, seed=1), lambda: x)
    logits = _v1.layers.dense(x, 10)
    return _spec(mode, logits, labels)


def keras_application_model_fn(name: str, **kwargs):
    """An Estimator model_fn training `tf.keras.applications.<name>(weights=None)` on the features."""

    def model_fn(features, labels, mode, params=None):
        builder = getattr(tf.keras.applications, name)
        model = builder(weights=None, input_tensor=features, classes=10, classifier_activation=None, **kwargs)
        return _spec(mode, model.outputs[0], labels, list(model.updates))

    return model_fn


def _spec(mode, logits, labels, updates=None):
    loss = _v1.losses.sparse_softmax_cross_entropy(labels, logits)
    updates = updates if updates is not None else _v1.get_collection(_v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(updates):
        train_op = _v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=_v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def image_input_fn(image_size: int = 16, batch_size: int = 8, seed: int = 0):
    """An input_fn of fixed random images and labels (float32 NHWC, int32), repeated."""
    rng = np.random.default_rng(seed)
    images = rng.random((batch_size * 4, image_size, image_size, 3), dtype=np.float32)
    labels = rng.integers(0, 10, size=batch_size * 4).astype(np.int32)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(batch_size, drop_remainder=True)

    return input_fn


def table(checks, results=None) -> str:
    """The checks as text: tensors listed and written per step, why the others have no file, first divergent op."""
    lines = [f"{'model':<22} {'runner':<9} {'mode':<7} {'listed':>6} {'written step 0/1':>16} "
             f"{'not written (why)':<40} {'ran, no file':>12} {'seconds':>7}"]
    for check in checks:
        written = "/".join(str(check.written.get(step, 0)) for step in (0, 1))
        why = ", ".join(f"{count} {kind}" for kind, count in check.missing.get(0, {}).items()) or "-"
        missed = sum(len(ops) for ops in check.ran_not_dumped.values()) if check.ran_not_dumped else "-"
        lines.append(f"{check.model:<22} {check.runner:<9} {check.mode:<7} {check.listed:>6} {written:>16} "
                     f"{why[:40]:<40} {missed!s:>12} {check.seconds:>7.1f}")
    for label, result in (results or {}).items():
        first = result.first_divergent
        row = first[1] if first else None
        lines.append(f"{label}: first divergent op "
                     + (f"{row.op} ({row.type_b or row.type}) step {row.step}" if row else "none"))
    return "\n".join(lines)


def small_models():
    """The fast subset's Session models: the TF1 batch-norm CNN (training placeholder, tf.cond dropout)
    and the smallest Keras application graph of the sweep (VGG16 at 32x32)."""
    from npu_sim_bridge.testing import zoo

    return {"tf1_batchnorm_cnn": zoo.tf1_batchnorm_cnn,
            "VGG16": lambda: zoo.keras_application("VGG16", image_size=32, batch_size=4)}


__all__ = ["DumpCheck", "MODES", "compare_modes", "estimator_dump", "session_dump", "small_models", "table",
           "cnn_model_fn", "keras_application_model_fn", "image_input_fn", "npu_config"]
