"""Gradient checkpointing with tf.contrib.graph_editor, as ModelZoo's memory-saving gradients do it: recompute
the forward pass from a checkpoint in copied ops, take gradients through the copy, train through the NpuOptimizer."""
import numpy as np
import tensorflow as tf
import tensorflow.contrib.graph_editor as ge
from npu_bridge.npu_init import npu_config_proto

rng = np.random.RandomState(0)
x = tf.constant(rng.rand(4, 6).astype(np.float32), name="x")
weights = [tf.Variable(rng.rand(*shape).astype(np.float32) - 0.5, name=f"w{index}")
           for index, shape in enumerate([(6, 8), (8, 8), (8, 3)])]
with tf.name_scope("net"):
    h1 = tf.nn.relu(tf.matmul(x, weights[0]), name="h1")
    h2 = tf.tanh(tf.matmul(h1, weights[1]), name="h2")
    loss = tf.reduce_sum(tf.square(tf.matmul(h2, weights[2])), name="loss")
reference = tf.gradients(loss, weights)


def recomputed_gradients(ys, xs):
    """Gradients of ys wrt xs where the forward ops are recomputed in copies, segment by segment."""
    bwd = ge.get_backward_walk_ops([y.op for y in ys], inclusive=True)
    fwd = ge.get_forward_walk_ops([v.op for v in xs], inclusive=True, within_ops=bwd)
    fwd = [op for op in fwd if op.inputs and op not in [v.op for v in xs] and "/read" not in op.name]
    checkpoints = [t for t in ge.filter_ts_from_regex(fwd, "h1") if t in ge.filter_ts(fwd, True)]
    stopped = {c: tf.stop_gradient(c, name=c.op.name + "_sg") for c in checkpoints}
    ops_after = set(ge.get_backward_walk_ops([y.op for y in ys], stop_at_ts=checkpoints)) & set(fwd)
    ops_after -= {c.op for c in checkpoints}
    copied_view, info = ge.copy_with_input_replacements(ge.sgv(list(ops_after)), {})
    copied = list(info._transformed_ops.values())
    rerouted = ge.reroute_ts(list(stopped.values()), list(stopped.keys()), can_modify=copied)
    copied_ys = [info._transformed_ops[y.op]._outputs[0] for y in ys]
    grads = tf.gradients(copied_ys, list(stopped.values()) + xs)
    for op in copied:
        ge.add_control_inputs(op, [y.op for y in ys])
    d_checkpoints, d_xs = grads[:len(checkpoints)], grads[len(checkpoints):]
    ops_before = [op for op in fwd if op not in ops_after]
    _, info_before = ge.copy_with_input_replacements(ge.sgv(ops_before), {})
    copied_checkpoints = [info_before.transformed(c) for c in checkpoints]
    more = tf.gradients(copied_checkpoints, xs, grad_ys=d_checkpoints)
    d_xs = [a if b is None else (b if a is None else a + b) for a, b in zip(d_xs, more)]
    return d_xs, {"rerouted": rerouted, "copied": len(copied) + len(info_before._transformed_ops),
                  "view_ops": len(copied_view.ops), "reads_checkpoint": any(
                      c in op.inputs for op in copied for c in checkpoints)}


grads, facts = recomputed_gradients([loss], weights)
scoped = ge.select_ops("^net/", graph=tf.get_default_graph())
train = tf.train.GradientDescentOptimizer(0.05).apply_gradients(zip(grads, weights))
with tf.Session(config=npu_config_proto()) as sess:
    sess.run(tf.global_variables_initializer())
    got, want = sess.run([grads, reference])
    first = sess.run(loss)
    for _ in range(3):
        sess.run(train)
    last = sess.run(loss)
print("GE grads_equal", all(np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want)),
      "rerouted", facts["rerouted"], "copied", facts["copied"], "view_ops", facts["view_ops"],
      "reads_checkpoint", facts["reads_checkpoint"], "net_ops", len(scoped))
print("GE trained", bool(last < first))
