"""tf.contrib.slim / layers / framework as ModelZoo scripts use them: tf-slim with TensorFlow 1.15's names."""
import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow.contrib.slim as slim
from tensorflow.contrib.slim.nets import resnet_utils, resnet_v1  # noqa: F401
from tensorflow.contrib.layers.python.layers import layers as layers_lib
from tensorflow.contrib.layers.python.layers import utils as layers_utils
from tensorflow.contrib.framework.python.ops import add_arg_scope, arg_scope  # noqa: F401

tf.set_random_seed(1)
images = tf.constant(np.random.RandomState(0).rand(2, 8, 8, 3).astype(np.float32))
labels = tf.one_hot([1, 2], 3)
with slim.arg_scope([slim.conv2d, slim.separable_conv2d, slim.conv2d_transpose],
                    normalizer_fn=slim.batch_norm, normalizer_params={"is_training": True}):
    net = slim.conv2d(images, 4, [3, 3], scope="conv1", outputs_collections="endpoints")
    net = slim.separable_conv2d(net, 4, [3, 3], depth_multiplier=1, scope="sep")
    net = slim.conv2d_transpose(net, 2, [3, 3], stride=2, scope="up")
net = tf.contrib.layers.instance_norm(net)
net = layers_lib.flatten(tf.contrib.layers.group_norm(net, groups=2, channels_axis=-1))
logits = slim.fully_connected(net, 3, activation_fn=None, scope="logits")
probabilities = slim.softmax(logits)
scale = slim.model_variable("scale", shape=[], initializer=tf.ones_initializer())
loss = tf.losses.softmax_cross_entropy(labels, logits * scale)
global_step = slim.get_or_create_global_step()
train_op = slim.learning.create_train_op(loss, tf.train.GradientDescentOptimizer(0.1), global_step=global_step)
optimize = tf.contrib.layers.optimize_loss(loss, global_step, 0.05, "SGD", variables=[scale])
endpoints = layers_utils.convert_collection_to_dict("endpoints")

total_params, _ = slim.model_analyzer.analyze_vars(slim.get_trainable_variables(), print_info=False)
folder = tempfile.mkdtemp()
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    losses = [sess.run(train_op) for _ in range(4)]
    sess.run(optimize)
    weights = sess.run(tf.contrib.framework.get_variables_by_name("weights")[0])
    prefix = tf.train.Saver().save(sess, os.path.join(folder, "model.ckpt"))

checkpoint_names = [name for name, _ in tf.contrib.framework.list_variables(prefix)]
with tf.Graph().as_default():
    restored = slim.conv2d(tf.zeros([1, 8, 8, 3]), 4, [3, 3], scope="conv1", normalizer_fn=slim.batch_norm)
    init_fn = slim.assign_from_checkpoint_fn(prefix, slim.get_variables_to_restore(include=["conv1"]))
    with tf.Session() as sess:
        init_fn(sess)
        restored_weights = sess.run(slim.get_variables_by_name("weights")[0])

example = tf.train.Example(features=tf.train.Features(feature={
    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))})).SerializeToString()
decoder = slim.tfexample_decoder.TFExampleDecoder(
    {"label": tf.FixedLenFeature([], tf.int64)}, {"label": slim.tfexample_decoder.Tensor("label")})
with tf.Graph().as_default(), tf.Session() as sess:
    decoded = sess.run(decoder.decode(tf.constant(example), ["label"]))

print("SLIM trained", len(losses), "loss_first", round(float(losses[0]), 4), "loss_last", round(float(losses[-1]), 4))
print("SLIM variables", " ".join(name for name in checkpoint_names if name.startswith(("conv1", "sep/", "up/"))))
print("SLIM restored", bool(np.array_equal(weights, restored_weights)), "params", int(total_params),
      "endpoints", sorted(endpoints), "decoded", [int(v) for v in decoded],
      "arg_scope_fn", callable(resnet_utils.resnet_arg_scope), "probabilities", probabilities.shape.as_list())
