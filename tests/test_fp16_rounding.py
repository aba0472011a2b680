"""The emulation's float16 rounding kernel (NpuSimRoundToFloat16): the Cast round trip's values, bit for bit."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.native.loader import load_npu_ops
from npu_sim_bridge.testing import models


def _bits_through(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel, Cast round trip) results of float32 `values`, as uint32 bit patterns."""
    ops = load_npu_ops()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        kernel = tf.bitcast(ops.npu_sim_round_to_float16(x * 1.0), tf.uint32)
        cast = tf.bitcast(tf.cast(tf.cast(x, tf.float16), tf.float32), tf.uint32)
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run([kernel, cast], {x: values})


def _hard_cases() -> np.ndarray:
    """Subnormals, halfway cases (ties to even up and down), the overflow edge, inf, NaNs, extremes."""
    f16 = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = f16[np.isfinite(f16)].astype(np.float32)
    above = np.nextafter(finite, np.float32(np.inf))
    below = np.nextafter(finite, np.float32(-np.inf))
    # Exactly halfway between neighbouring float16 values (and one float32 ulp either side).
    ordered = np.unique(finite)
    halfway = ((ordered[:-1].astype(np.float64) + ordered[1:]) / 2).astype(np.float32)
    near_halfway = np.concatenate([np.nextafter(halfway, np.float32(np.inf)),
                                   np.nextafter(halfway, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e5, -1e30, 3.4e38, 2.0 ** -24,
                        2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1e-45,
                        np.inf, -np.inf, np.nan, -np.nan], np.float32)
    nan_payloads = np.array([0x7f800001, 0x7fc00001, 0x7fc02000, 0x7fbfffff, 0xffc12345, 0xff800001],
                            np.uint32).view(np.float32)
    return np.concatenate([finite, above, below, halfway, near_halfway, special, nan_payloads])


def test_kernel_matches_the_cast_round_trip_on_hard_cases():
    values = _hard_cases()
    kernel, cast = _bits_through(values)
    mismatched = np.flatnonzero(kernel != cast)
    assert mismatched.size == 0, [(hex(values.view(np.uint32)[i]), hex(kernel[i]), hex(cast[i]))
                                  for i in mismatched[:5]]
    rounded = kernel.view(np.float32)
    assert np.isinf(rounded[values == np.float32(65520.0)]).all()  # float16 overflow stays real
    assert rounded[values == np.float32(65504.0)][0] == 65504.0


def test_kernel_matches_the_cast_round_trip_on_a_sample_of_every_bit_pattern():
    # Every 4,099th float32 bit pattern (about a million, every exponent and both signs) and random data.
    sample = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    rng = np.random.default_rng(0)
    noise = np.concatenate([rng.standard_normal(100_000) * scale for scale in (1e-6, 1e-3, 1.0, 1e3, 1e5)])
    values = np.concatenate([sample, noise.astype(np.float32)])
    kernel, cast = _bits_through(values)
    assert np.array_equal(kernel, cast)


def _train(config, steps: int = 3):
    """Loss and variables of a small CNN after a few Adam steps (the same data, the same seed)."""
    x, y = models.small_cnn_dataset(64, seed=0)
    model = models.small_cnn(batch_size=16, filters=(8, 16), hidden=32)
    feed = {model.inputs["images"]: x[:16], model.inputs["labels"]: y[:16]}
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        losses = [sess.run([model.loss, model.train_op], feed)[0] for _ in range(steps)]
        with model.graph.as_default():
            variables = sess.run(tf.compat.v1.trainable_variables())
    return losses, variables


def _round_ops(report) -> dict[str, int]:
    found: dict[str, int] = {}
    for decision in report.nodes.values():
        if decision.reason and "float16 round trip" in decision.reason:
            found[decision.op] = found.get(decision.op, 0) + 1
    return found


def _precision_stats(report):
    return next(p.stats for p in report.passes if p.name == "precision")


def _sim_report():
    return next(r for r in npu_sim_bridge.recent_reports()
                if any(p.name == "precision" and p.stats.get("round_trips") for p in r.passes))


def test_a_training_step_gives_the_same_numbers_with_the_kernel_and_with_casts(npu_config):
    kernel_losses, kernel_vars = _train(npu_config(precision_mode="allow_mix_precision",
                                                   sim_fp16_rounding="kernel"))
    report = _sim_report()
    assert _precision_stats(report)["rounding"] == "kernel"
    assert set(_round_ops(report)) == {"NpuSimRoundToFloat16"}
    npu_sim_bridge.clear_reports()
    cast_losses, cast_vars = _train(npu_config(precision_mode="allow_mix_precision", sim_fp16_rounding="cast"))
    report = _sim_report()
    assert _precision_stats(report)["rounding"] == "cast" and set(_round_ops(report)) == {"Cast"}
    assert kernel_losses == cast_losses
    for kernel, cast in zip(kernel_vars, cast_vars):
        np.testing.assert_array_equal(kernel, cast)
    plain_losses, _ = _train(tf.compat.v1.ConfigProto())
    assert plain_losses != kernel_losses  # the rounding happened


def test_a_session_rounds_with_the_kernel_by_default_and_it_runs(npu_config):
    model = models.small_cnn(batch_size=4, filters=(4, 8), hidden=8)
    x, y = models.small_cnn_dataset(4, seed=0)
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=model.graph, config=npu_config(precision_mode="allow_mix_precision")) as sess:
        sess.run(model.init_op)
        sess.run(model.train_op, {model.inputs["images"]: x, model.inputs["labels"]: y},
                 options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                 run_metadata=metadata)
    labels = [s.timeline_label for d in metadata.step_stats.dev_stats for s in d.node_stats]
    rounds = [label for label in labels if "NpuSimRoundToFloat16(" in label]
    assert rounds and all("/NpuSimRound_" in label.split(" = ")[0] for label in rounds)
    assert not any(" = Cast(" in label and "/NpuSimRound_" in label for label in labels)
    report = _sim_report()
    assert _precision_stats(report)["round_trips"] == _round_ops(report)["NpuSimRoundToFloat16"]


def test_offline_rewrites_keep_cast_pairs_unless_asked():
    graph = models.mlp().graph.as_graph_def()
    options = {"precision_mode": "allow_mix_precision"}
    rewritten, report = npu_sim_bridge.rewrite(graph, options)
    ops = {node.op for node in rewritten.node} | {n.op for f in rewritten.library.function for n in f.node_def}
    assert "Cast" in ops and "NpuSimRoundToFloat16" not in ops and _precision_stats(report)["rounding"] == "cast"
    rewritten, report = npu_sim_bridge.rewrite(graph, dict(options, sim_fp16_rounding="kernel"))
    body_ops = {node.op for node in rewritten.node} | {n.op for f in rewritten.library.function for n in f.node_def}
    assert "NpuSimRoundToFloat16" in body_ops and _precision_stats(report)["rounding"] == "kernel"
    # bfloat16 has no rounding kernel: its round trips stay Cast pairs.
    _, report = npu_sim_bridge.rewrite(graph, {"precision_mode": "allow_mix_precision_bf16",
                                               "sim_fp16_rounding": "kernel"})
    assert _precision_stats(report)["rounding"] == "cast"


def test_a_bad_rounding_value_names_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"sim_fp16_rounding value 'fast'.*auto, kernel, cast"):
        npu_sim_bridge.rewrite(models.mlp().graph.as_graph_def(), {"sim_fp16_rounding": "fast"})


def test_the_gradient_goes_back_through_the_same_rounding_as_through_the_casts():
    ops = load_npu_ops()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.linspace(-3, 3, 64, dtype=np.float32))
        upstream = tf.constant(np.linspace(1e-4, 70000.0, 64, dtype=np.float32))  # not float16 values
        kernel = tf.gradients(ops.npu_sim_round_to_float16(x), x, grad_ys=upstream)[0]
        casts = tf.gradients(tf.cast(tf.cast(x, tf.float16), tf.float32), x, grad_ys=upstream)[0]
    with tf.compat.v1.Session(graph=graph) as sess:
        kernel, casts = sess.run([kernel, casts])
    np.testing.assert_array_equal(kernel, casts)
    assert np.isinf(kernel[-1])  # 70000 overflows float16 on the way back too


def test_bodies_xla_compiles_round_with_casts_and_train_as_with_casts_everywhere(npu_config):
    # Keras runs grouped convolutions through a tf.function(jit_compile=True): XLA has no kernel for the
    # rounding op, so those bodies (forward and gradient) keep Cast pairs and the step still runs.
    def train(rounding):
        with tf.Graph().as_default() as graph:
            x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 4])
            init = tf.keras.initializers.GlorotUniform(seed=1)
            y = tf.keras.layers.Conv2D(4, 3, groups=2, padding="same", kernel_initializer=init)(x)
            logits = tf.keras.layers.Dense(3, kernel_initializer=init)(tf.reshape(y, [2, -1]))
            loss = tf.reduce_mean(tf.square(logits))
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf.compat.v1.global_variables_initializer()
        data = np.random.default_rng(0).random((2, 8, 8, 4), dtype=np.float32)
        config = npu_config(precision_mode="allow_mix_precision", sim_fp16_rounding=rounding)
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            sess.run(init)
            return [sess.run([loss, train_op], {x: data})[0] for _ in range(2)]

    kernel_losses = train("kernel")
    report = _sim_report()
    compiled = {name for name, d in report.nodes.items()
                if "jit_compiled_convolution_op" in name and d.reason and "float16 round trip" in d.reason}
    assert compiled and all(report.nodes[name].op == "Cast" for name in compiled)
    assert "NpuSimRoundToFloat16" in _round_ops(report)   # the main graph still uses the kernel
    assert kernel_losses == train("cast")


@pytest.mark.parametrize("device", ["/job:localhost/replica:0/task:0/device:CPU:0",
                                    "/job:localhost/replica:0/task:0/device:GPU:0"])
def test_a_session_graph_placed_on_a_gpu_rounds_with_cast_pairs(device):
    """The rounding kernel has a CPU implementation only: on a GPU each round trip would go to the host."""
    from npu_sim_bridge.config import from_dict
    from npu_sim_bridge.passes import ItemInfo, run_pipeline

    model = models.mlp()
    graph = model.graph.as_graph_def()
    for node in graph.node:
        node.device = device
    options = from_dict({"precision_mode": "allow_mix_precision", "sim_passes": "precision"})
    result = run_pipeline(graph, options, ItemInfo(id="tf_graph", fetch=tuple(model.fetch_names())))
    ops = {node.op for node in result.graph_def.node}
    on_gpu = "GPU" in device
    assert _precision_stats(result.report)["rounding"] == ("cast" if on_gpu else "kernel")
    assert ("NpuSimRoundToFloat16" in ops) is not on_gpu and "Cast" in ops
    warned = [text for text in result.report.warnings if "placed on a GPU" in text]
    assert bool(warned) is on_gpu
