"""tf.contrib image / opt / summary / quantize / metrics / util / learn, and MNIST's input_data, in a TF1 script.

Argument: a folder holding the four MNIST .gz files.
"""
import glob
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.contrib.image.python.ops import distort_image_ops
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets(sys.argv[1], one_hot=True, validation_size=2, seed=0)
batch_images, batch_labels = mnist.train.next_batch(3)

images = tf.placeholder(tf.float32, [None, 784])
square = tf.reshape(images, [-1, 28, 28, 1])
rotated = tf.contrib.image.rotate(square, np.pi / 2, interpolation="NEAREST")
translated = tf.contrib.image.translate(square, [[1.0, 0.0]])
transformed = tf.contrib.image.transform(square, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
hsv = distort_image_ops.adjust_hsv_in_yiq(tf.ones([1, 2, 2, 3]), 0.0, 1.0, 1.0)

# LARS on dense weights, LazyAdam on an embedding (sparse gradients): only the looked-up rows move.
embedding = tf.get_variable("embedding", [5, 2], initializer=tf.ones_initializer())
weights = tf.get_variable("weights", [784, 10], initializer=tf.zeros_initializer())
logits = tf.matmul(images, weights) + tf.reduce_sum(tf.nn.embedding_lookup(embedding, [1, 3]))
labels = tf.placeholder(tf.float32, [None, 10])
loss = tf.losses.softmax_cross_entropy(labels, logits)
global_step = tf.train.get_or_create_global_step()
lars = tf.contrib.opt.LARSOptimizer(0.001, weight_decay=0.0).minimize(loss, var_list=[weights])
lazy = tf.contrib.opt.LazyAdamOptimizer(0.1).minimize(loss, var_list=[embedding], global_step=global_step)
accuracy, accuracy_update = tf.contrib.metrics.streaming_accuracy(tf.argmax(logits, 1), tf.argmax(labels, 1))

tf.contrib.quantize.create_training_graph(quant_delay=0)
logdir = tempfile.mkdtemp()
writer = tf.contrib.summary.create_file_writer(logdir)
with writer.as_default(), tf.contrib.summary.always_record_summaries():
    tf.contrib.summary.scalar("loss", loss)
summaries = tf.contrib.summary.all_summary_ops()
static = tf.contrib.util.constant_value(tf.constant([2, 3]))
with tf.variable_scope("encoder"):
    rnn_out, _ = tf.nn.dynamic_rnn(tf.contrib.rnn.LayerNormBasicLSTMCell(4), tf.reshape(images, [-1, 28, 28]),
                                   dtype=tf.float32)

feed = {images: batch_images, labels: batch_labels}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.local_variables_initializer())
    with writer.as_default():
        tf.contrib.summary.initialize(graph=tf.get_default_graph(), session=sess)
    first = sess.run(loss, feed)
    for _ in range(3):
        sess.run([lars, lazy, summaries, accuracy_update], feed)
    rnn_value = sess.run(rnn_out, feed)
    last, table, rot, shifted, same = sess.run([loss, embedding, rotated, translated, transformed], feed)
    sess.run(writer.flush())
    hsv_value = sess.run(hsv)

print("CONTRIBX mnist", mnist.train.num_examples, mnist.validation.num_examples, mnist.test.num_examples,
      batch_images.shape, batch_labels.shape, float(batch_images.max()) <= 1.0)
print("CONTRIBX image rotate", bool(np.array_equal(rot[0, :, :, 0], np.rot90(batch_images[0].reshape(28, 28)))),
      "translate", bool(np.array_equal(shifted[0, :, 1:, 0], batch_images[0].reshape(28, 28)[:, :-1])),
      "transform", bool(np.array_equal(same[0, :, :, 0], batch_images[0].reshape(28, 28))),
      "hsv", bool(np.allclose(hsv_value, 1.0, atol=1e-5)))
print("CONTRIBX opt loss_first", round(float(first), 4), "loss_last", round(float(last), 4),
      "rows_moved", [int(i) for i in np.nonzero(np.any(table != 1.0, axis=1))[0]])
rnn_names = sorted(v.op.name.split("/", 2)[2] for v in tf.global_variables("encoder/"))
print("CONTRIBX rnn", rnn_value.shape, " ".join(rnn_names))
print("CONTRIBX summary_files", len(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))),
      "static", static.tolist())

try:
    input_data.read_data_sets(os.path.join(logdir, "no_mnist_here"))
except FileNotFoundError as error:
    print("CONTRIBX missing:", error)
