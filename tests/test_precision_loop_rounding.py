"""Float16 round trips of the emulation in a v1 while loop (an LSTM's): the loop-invariant weights and bias are
rounded once per step outside the frame, the gradient loop's pops of rounded activations and the one-hot
labels are not rounded again, and training gives the same numbers, bit for bit, as rounding them all."""

import numpy as np
import pytest
import tensorflow as tf

import npu_sim_bridge
from npu_sim_bridge.passes.precision import exact, hoist
from npu_sim_bridge.testing import models

TIME_STEPS = 5
ROUND = "NpuSimRoundToFloat16"


def _lstm():
    return models.lstm(batch_size=2, time_steps=TIME_STEPS, input_dim=4, units=4, control_flow="v1",
                       with_saver=False)


def _train(config, steps: int = 3):
    """Losses of a few steps, the variables after them, and the rounding kernels one more (traced) step
    runs, by node name."""
    model = _lstm()
    feed = model.feed(np.random.default_rng(0))
    metadata = tf.compat.v1.RunMetadata()
    trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        losses = [sess.run([model.loss, model.train_op], feed)[0] for _ in range(steps)]
        sess.run(model.train_op, feed, options=trace, run_metadata=metadata)
        with model.graph.as_default():
            variables = sess.run(tf.compat.v1.trainable_variables())
    runs: dict[str, int] = {}
    for device in metadata.step_stats.dev_stats:
        for stats in device.node_stats:
            if f" = {ROUND}(" in stats.timeline_label:
                runs[stats.node_name] = runs.get(stats.node_name, 0) + 1
    return losses, variables, runs


def _invariant_rounds(runs: dict[str, int]) -> dict[str, int]:
    """The rounding kernels of the LSTM's weights and bias, which enter the loops as invariants."""
    return {name: count for name, count in runs.items()
            if name.endswith(("/MatMul/Enter/NpuSimRound_0_float16", "/BiasAdd/Enter/NpuSimRound_0_float16"))}


@pytest.fixture(name="everything_rounded_in_place")
def everything_rounded_in_place_fixture(monkeypatch):
    """The rewrite as it was before: no round trip moved out of its frame, every pop and one-hot rounded."""
    def unchanged():
        monkeypatch.setattr(hoist, "hoist_invariant_round_trips", lambda view, inserted: 0)
        monkeypatch.setattr(exact, "popped_float16_values", lambda *args: False)
        monkeypatch.setattr(exact, "SELECTS_INPUTS", {})
    yield unchanged
    monkeypatch.undo()


def test_loop_invariant_values_are_rounded_once_per_step_with_the_same_numbers(npu_config,
                                                                                  everything_rounded_in_place):
    config = npu_config(precision_mode="allow_mix_precision", sim_fp16_rounding="kernel")
    losses, variables, runs = _train(config)
    stats = next(p.stats for r in npu_sim_bridge.recent_reports() for p in r.passes
                 if p.name == "precision" and p.stats.get("round_trips"))
    everything_rounded_in_place()
    npu_sim_bridge.clear_reports()
    old_losses, old_variables, old_runs = _train(config)

    assert losses == old_losses
    for new, old in zip(variables, old_variables):
        np.testing.assert_array_equal(new, old)
    # The forward loop's weights and bias and the gradient loop's weights: once per iteration before,
    # once per step now (Grappler may merge the two round trips of the weights, now both outside).
    old_invariant, invariant = _invariant_rounds(old_runs), _invariant_rounds(runs)
    assert len(old_invariant) == 3 and invariant and set(invariant) <= set(old_invariant)
    assert all(count > TIME_STEPS for count in old_invariant.values())
    assert all(count == 1 for count in invariant.values())
    assert stats["round_trips_hoisted"] == 3
    # The gradient loop pops what the forward loop pushed, rounded already; the one-hot labels are 0 and 1.
    assert any("StackPopV2/NpuSimRound" in name for name in old_runs)
    assert not any("StackPopV2/NpuSimRound" in name for name in runs)
    assert sum(runs.values()) < sum(old_runs.values())


def test_an_offline_rewrite_reads_the_invariant_into_the_frame_rounded():
    model = _lstm()
    graph_def, report = npu_sim_bridge.rewrite(
        model.graph_def(), {"precision_mode": "allow_mix_precision", "sim_fp16_rounding": "kernel"},
        fetches=model.fetch_names())
    nodes = {node.name: node for node in graph_def.node}
    for function in graph_def.library.function:
        nodes.update((node.name, node) for node in function.node_def)
    enter = nodes["rnn/while/lstm_cell/MatMul/Enter"]
    rounding = nodes["rnn/while/lstm_cell/MatMul/Enter/NpuSimRound_0_float16"]
    assert rounding.op == ROUND and enter.attr["is_constant"].b
    # The round trip reads the weights outside the frame; the Enter brings the rounded weights in.
    assert rounding.input[0].split(":")[0] == "rnn/lstm_cell/kernel/Read/Identity"
    assert enter.input[0].split(":")[0] == rounding.name
    def readers(name):
        return [node.name for node in nodes.values() if any(text.split(":")[0] == name for text in node.input)]

    assert readers(rounding.name) == [enter.name] and readers(enter.name)
    # No round trip of what holds float16 values already: the gradient loop's pops of rounded activations,
    # the one-hot labels, an Enter of zeros (a loop's start value, a gradient accumulator's).
    def producer(node, position=0):
        return nodes[node.input[position].split(":")[0]]

    sources = [producer(node) for node in nodes.values() if node.op == ROUND]
    assert sources and not any(
        source.op in ("StackPopV2", "OneHot") or (source.op == "Reshape" and producer(source).op == "OneHot")
        or (source.op == "Enter" and (source.attr["is_constant"].b or producer(source).op in ("Const", "Fill")))
        for source in sources)
    # The report's row still names the round trip and what it rounds.
    record = report.nodes[rounding.name]
    assert record.op == ROUND and "rnn/while/lstm_cell/MatMul/Enter" in record.reason


