"""A frozen TF 1.15 graph prepared for inference with tensorflow.tools.graph_transforms.TransformGraph."""
import numpy as np
import tensorflow as tf
from tensorflow.tools.graph_transforms import TransformGraph

rng = np.random.RandomState(0)
with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [None, 6, 6, 3], name="input")
    w = tf.Variable(rng.rand(3, 3, 3, 4).astype(np.float32), name="w")
    conv = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
    bn = tf.nn.fused_batch_norm(conv, tf.constant(rng.rand(4).astype(np.float32) + 0.5), tf.constant(rng.rand(4).astype(np.float32)),
                                mean=tf.constant(rng.rand(4).astype(np.float32)), variance=tf.constant(rng.rand(4).astype(np.float32) + 0.1),
                                is_training=False)[0]
    act = tf.identity(tf.nn.relu(bn))
    w2 = tf.Variable(rng.rand(4 * 36, 5).astype(np.float32), name="w2")
    mm = tf.matmul(tf.reshape(act, [-1, 4 * 36]), w2)
    scaled = tf.multiply(mm, tf.constant(rng.rand(5).astype(np.float32)))
    dup = tf.add(scaled * 2.0, tf.constant(1.0) + tf.constant(1.0), name="output")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        frozen = tf.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["output"])
        feed = rng.rand(2, 6, 6, 3).astype(np.float32)
        want = sess.run(dup, {x: feed})
transforms = ['remove_nodes(op=Identity)', 'merge_duplicate_nodes', 'strip_unused_nodes(type=float, shape="2,6,6,3")',
              'fold_constants(ignore_errors=true)', 'fold_batch_norms', 'fold_old_batch_norms', 'sort_by_execution_order']
out = TransformGraph(frozen, ["input"], ["output"], transforms)
with tf.Graph().as_default():
    tf.import_graph_def(out, name="")
    with tf.Session() as sess:
        got = sess.run("output:0", {"input:0": feed})
def ops_after(names):
    return sorted(node.op for node in TransformGraph(frozen, ["input"], ["output"], names).node)


bare = ["remove_nodes(op=Identity)"]  # the frozen weights are read through Identity nodes (w/read)
print("GT folds", "FusedBatchNormV3" in ops_after(bare), "FusedBatchNormV3" in ops_after(bare + ["fold_old_batch_norms"]),
      ops_after(bare).count("Mul"), ops_after(bare + ["fold_batch_norms"]).count("Mul"),
      ops_after(["remove_nodes(op=Identity)"]).count("Identity"))
print("GT same", np.allclose(got, want, rtol=1e-4, atol=1e-5), len(frozen.node), len(out.node), sorted({n.op for n in out.node}))
try:
    TransformGraph(frozen, ["input"], ["output"], ["quantize_weights"])
except ValueError as error:
    print("GT error", error)

# graph_matcher (tf.contrib.quantize's pattern matcher): the Conv2D + batch norm layers of the graph
from tensorflow.contrib.quantize.python.graph_matcher import GraphMatcher, OneofPattern, OpTypePattern  # noqa: E402

weights = OpTypePattern("Identity", inputs=[OpTypePattern("VariableV2|Const", name="variable")])
layer = OpTypePattern("Conv2D|MatMul", name="layer", inputs=["*", weights])
norm = OpTypePattern("FusedBatchNorm|FusedBatchNormV3", name="norm", inputs=[layer, "*", "*", "*", "*"])
pattern = OneofPattern([norm, OpTypePattern("Mul", name="scale", inputs=[layer, "Const"], ordered_inputs=False)])
found = [(m.get_op("layer").type, (m.get_op("norm") or m.get_op("scale")).type, m.get_op("variable").name)
         for m in GraphMatcher(pattern).match_graph(g)]
print("GT matches", found)
