"""More TF 1.15 names scripts use: contrib opt/rnn/crf/legacy_seq2seq/data/distributions, Keras 1.15 names."""
import os
import tempfile
import warnings

import numpy as np
import tensorflow as tf
from tensorflow.contrib.learn.python.learn.datasets.mnist import DataSet
from tensorflow.python.keras.preprocessing.sequence import pad_sequences
from tensorflow.python.keras.utils import multi_gpu_model

tf.set_random_seed(3)
rng = np.random.RandomState(0)
features = tf.constant(rng.rand(4, 3, 2).astype(np.float32))
labels = tf.constant([[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 0, 1]])

cells = lambda: [tf.nn.rnn_cell.GRUCell(3), tf.contrib.rnn.LSTMBlockCell(3)]  # noqa: E731
outputs, _, _ = tf.contrib.rnn.stack_bidirectional_dynamic_rnn(cells(), cells(), features, dtype=tf.float32)
logits = tf.layers.dense(outputs, 3)
log_likelihood, transitions = tf.contrib.crf.crf_log_likelihood(logits, labels, tf.fill([4], 3))
per_step = [logits[:, t] for t in range(3)]
seq_loss = tf.contrib.legacy_seq2seq.sequence_loss(per_step, [labels[:, t] for t in range(3)],
                                                   [tf.ones([4])] * 3)
manual = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
loss = tf.reduce_mean(-log_likelihood) + seq_loss
step = tf.train.get_or_create_global_step()
optimizer = tf.contrib.opt.MovingAverageOptimizer(tf.contrib.opt.AdamWOptimizer(1e-4, 0.05), average_decay=0.5)
train = optimizer.minimize(loss, global_step=step)
nadam = tf.contrib.opt.NadamOptimizer(0.01).minimize(seq_loss)
saver = optimizer.swapping_saver()
median = tf.contrib.distributions.percentile(tf.constant([[1.0, 9.0, 3.0], [4.0, 2.0, 8.0]]), 50.0, axis=1)
batches = tf.data.Dataset.range(10).apply(tf.contrib.data.batch_and_drop_remainder(4))
batch_count = tf.data.experimental.cardinality(batches)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss)
    for _ in range(5):
        sess.run([train, nadam])
    values = sess.run({"loss": loss, "seq": seq_loss, "manual": manual, "median": median, "batches": batch_count})
    prefix = saver.save(sess, os.path.join(tempfile.mkdtemp(), "averaged"), write_meta_graph=False)
    dense_kernel = tf.global_variables("dense/kernel")[0]
    live = sess.run(dense_kernel)
    averaged = sess.run(optimizer._ema.average(dense_kernel))  # pylint: disable=protected-access
saved = tf.train.load_variable(prefix, "dense/kernel")
rnn_names = sorted({v.op.name.rsplit("/", 1)[0] for v in tf.trainable_variables("stack_bidirectional_rnn")})

keras_model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    same_model = multi_gpu_model(keras_model, gpus=2)
policy = tf.keras.mixed_precision.experimental.Policy("mixed_float16")
data = DataSet(np.zeros((5, 28, 28, 1), np.uint8), np.arange(5))

print("MORE loss_first", round(float(first), 4), "loss_last", round(float(values["loss"]), 4),
      "seq_matches", bool(np.isclose(values["seq"], values["manual"], rtol=1e-5)), "transitions", transitions.shape)
print("MORE averaged_saved", bool(np.allclose(saved, averaged)), "differs_from_live", not np.allclose(saved, live))
print("MORE median", values["median"].tolist(), "batches", int(values["batches"]))
print("MORE rnn", " ".join(rnn_names))
print("MORE keras pad", pad_sequences([[1, 2], [3]], maxlen=3).tolist(), "layers", len(keras_model._layers),
      "multi_gpu_same", same_model is keras_model, "warned", any("without effect" in str(w.message) for w in caught),
      "policy", policy.compute_dtype, "mnist_dataset", data.num_examples)

# cudnn_rnn, recurrent and rnn internals on TensorFlow's unfused RNN ops; tfprof; estimator extenders.
from tensorflow.contrib.cudnn_rnn.python.ops import cudnn_rnn_ops  # noqa: E402
from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _Linear  # noqa: E402

with tf.Graph().as_default():
    sequence = tf.constant(rng.rand(5, 2, 3).astype(np.float32))  # time-major
    cudnn_out, (cudnn_h, _) = tf.contrib.cudnn_rnn.CudnnLSTM(
        2, 4, direction=cudnn_rnn_ops.CUDNN_RNN_BIDIRECTION)(sequence)
    with tf.variable_scope("linear"):
        linear = _Linear([sequence[0], sequence[1]], 6, True)([sequence[0], sequence[1]])
    functional, _ = tf.contrib.recurrent.functional_rnn(tf.nn.rnn_cell.GRUCell(2), tf.transpose(sequence, [1, 0, 2]),
                                                        dtype=tf.float32, scope="functional")
    clipped = tf.contrib.estimator.clip_gradients_by_norm(tf.train.GradientDescentOptimizer(1.0), 1e-3)
    before = tf.identity(tf.global_variables("linear/kernel")[0])
    with tf.control_dependencies([before]):
        step = clipped.minimize(tf.reduce_sum(linear) * 100.0)
    with tf.contrib.tfprof.ProfileContext(tempfile.mkdtemp()), tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel_before, _ = sess.run([before, step])
        moved = np.linalg.norm(sess.run(tf.global_variables("linear/kernel")[0]) - kernel_before)
        shapes = [list(value.shape) for value in sess.run([cudnn_out, cudnn_h, linear, functional])]
    stats = tf.contrib.tfprof.model_analyzer.print_model_analysis(
        tf.get_default_graph(), tfprof_options=tf.contrib.tfprof.model_analyzer.TRAINABLE_VARS_PARAMS_STAT_OPTIONS)
    expected_params = sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())
print("MORE rnn_more", shapes, "clipped", bool(moved <= 1e-3 + 1e-9),
      "params", int(stats.total_parameters) == expected_params)
