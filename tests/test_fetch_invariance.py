"""What a Session fetches does not change the numbers: the loss is bit-equal whatever else is fetched.

On the NPU a fetch reads an op's output; it does not change how the op runs. Each model of the sweep
runs its loss under allow_mix_precision with the loss alone, with each of a few intermediate tensors
beside it, and with all of them; every fetch set is a graph of its own for Grappler, rewritten anew.
"""

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.testing import models

# Float ops whose decisions differ under allow_mix_precision (white, gray, black, multi-output).
_INTERMEDIATE_OPS = ("MatMul", "BatchMatMulV2", "Conv2D", "BiasAdd", "Relu", "AddV2", "Mul", "Softmax",
                     "FusedBatchNormV3", "Tanh", "Sigmoid", "Mean")
_STILL = {"bert": dict(dropout=0.0)}  # no random op: the same feed gives the same loss


def _forward_ancestors(loss: tf.Tensor) -> list[tf.Operation]:
    """The ops the loss reads, nearest last (graph order), without the gradient or training ops."""
    seen, stack = set(), [loss.op]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
    return [op for op in loss.graph.get_operations() if op in seen and op is not loss.op]


def _intermediates(model) -> list[tf.Tensor]:
    """The first op of each type in _INTERMEDIATE_OPS that the loss reads (outside while loops), its output 0."""
    chosen = {}
    for op in _forward_ancestors(model.loss):
        in_loop = op._control_flow_context is not None  # a v1 while body's tensors cannot be fetched
        if op.type in _INTERMEDIATE_OPS and op.type not in chosen and op.outputs[0].dtype == tf.float32 \
                and not in_loop:
            chosen[op.type] = op.outputs[0]
    return list(chosen.values())


@pytest.mark.parametrize("name", sorted(models.small_builders()))
def test_the_loss_is_bit_equal_whatever_else_is_fetched(name, npu_config):
    model = models.small_builders()[name](**_STILL.get(name, {}))
    extras = _intermediates(model)
    assert len(extras) >= 3, f"{name}: too few intermediate ops to fetch ({[t.name for t in extras]})"
    feed = model.feed(np.random.default_rng(7))
    config = npu_config(precision_mode="allow_mix_precision")
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        alone = sess.run(model.loss, feed)
        fetch_sets = [[extra] for extra in extras] + [extras]
        for fetched in fetch_sets:
            loss, *values = sess.run([model.loss, *fetched], feed)
            assert np.array_equal(np.asarray(loss), np.asarray(alone), equal_nan=True), (
                f"{name}: the loss is {loss} fetched with {[t.name for t in fetched]}, {alone} alone")
            for tensor, value in zip(fetched, values):  # the fetch keeps its dtype and shape
                assert value.dtype == np.float32 and tuple(value.shape) == tuple(sess.run(tf.shape(tensor), feed))
