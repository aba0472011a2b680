"""The tf.contrib names migrated scripts use most, trained through the NpuOptimizer; then names with no equivalent."""
import numpy as np
import tensorflow as tf
import tensorflow.contrib.slim as slim
from tensorflow.contrib import rnn
from npu_bridge.npu_init import *
from npu_bridge.estimator.npu.npu_loss_scale_optimizer import NPULossScaleOptimizer

tf.set_random_seed(0)
images = tf.constant(np.random.RandomState(5).rand(4, 8, 8, 3).astype(np.float32))
labels = tf.constant([0, 1, 2, 1])
with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_regularizer=slim.l2_regularizer(1e-4),
                    weights_initializer=tf.contrib.layers.variance_scaling_initializer()):
    net = slim.conv2d(images, 4, [3, 3], normalizer_fn=slim.batch_norm,
                      normalizer_params={"is_training": True, "updates_collections": None}, scope="conv1")
    net = slim.max_pool2d(net, [2, 2], scope="pool1")
    net = slim.dropout(net, keep_prob=0.9, is_training=True)
    net = tf.contrib.layers.layer_norm(slim.flatten(net))
    logits = slim.fully_connected(net, 3, activation_fn=None, scope="logits")

sequence = tf.constant(np.random.RandomState(6).rand(4, 5, 2).astype(np.float32))
cell = rnn.MultiRNNCell([rnn.LSTMCell(6), tf.contrib.rnn.GRUCell(6)])
rnn_outputs, _ = tf.nn.dynamic_rnn(cell, sequence, dtype=tf.float32)
rnn_head = tf.contrib.layers.fully_connected(rnn_outputs[:, -1], 3, activation_fn=None,
                                             weights_initializer=tf.contrib.layers.xavier_initializer())

dataset = tf.data.Dataset.range(16).apply(tf.contrib.data.map_and_batch(lambda i: tf.cast(i, tf.float32), 4))
batch = dataset.prefetch(tf.contrib.data.AUTOTUNE).make_one_shot_iterator().get_next()

loss = (tf.losses.sparse_softmax_cross_entropy(labels, logits + rnn_head) + tf.losses.get_regularization_loss()
        + 0.0 * tf.reduce_sum(batch))
global_step = tf.contrib.framework.get_or_create_global_step()
optimizer = tf.contrib.mixed_precision.LossScaleOptimizer(tf.train.AdamOptimizer(0.01),
                                                          tf.contrib.mixed_precision.FixedLossScaleManager(128))
train_op = optimizer.minimize(loss, global_step=global_step)
hparams = tf.contrib.training.HParams(learning_rate=0.1, layers=[32, 16], use_bn=True)
hparams.parse("layers=[8,4],use_bn=false")

with tf.Session(config=npu_config_proto()) as sess:
    sess.run(tf.global_variables_initializer())
    losses = [sess.run([train_op, loss])[1] for _ in range(3)]
    moving_mean = sess.run(tf.global_variables("conv1/BatchNorm/moving_mean")[0])
print("CONTRIB trained", len(losses), "loss_first", round(float(losses[0]), 4),
      "loss_last", round(float(losses[-1]), 4), "moving_mean_updated", bool(np.any(moving_mean != 0.0)))
print("CONTRIB variables", " ".join(sorted(v.op.name for v in slim.get_model_variables())))
print("CONTRIB hparams", hparams.values())
print("CONTRIB same_objects", isinstance(optimizer, NPULossScaleOptimizer),
      tf.contrib.tpu.TPUEstimatorSpec is tf.compat.v1.estimator.tpu.TPUEstimatorSpec,
      tf.contrib.rnn.LSTMStateTuple is tf.nn.rnn_cell.LSTMStateTuple)

from tensorflow.contrib.cloud import BigtableClient  # noqa: E402  (imports, as in TensorFlow 1.15; fails when used)

try:
    BigtableClient("project", "instance")
except AttributeError as error:
    print("CONTRIB error cloud:", error)
from tensorflow.contrib.cudnn_rnn import CudnnLSTM  # noqa: E402  (the very object of tf.contrib.cudnn_rnn)

print("CONTRIB cudnn_rnn same object:", CudnnLSTM is tf.contrib.cudnn_rnn.CudnnLSTM)
try:
    tf.contrib.not_a_contrib_module
except AttributeError as error:
    print("CONTRIB error unknown:", error)
