"""A TF1 training script whose first MatMul overflows float16 (activations near 1e5) next to a harmless MatMul."""

import argparse

import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *  # noqa: F401,F403

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--broken-float32", action="store_true", help="make the float32 model itself give nan")
parser.add_argument("--quiet", action="store_true", help="print no loss")
flags = parser.parse_args()

rs = np.random.RandomState(0)
x_data = np.abs(rs.normal(3, 1, (8, 64))).astype(np.float32)
y_data = rs.normal(0, 1, (8, 16)).astype(np.float32)

x = tf.placeholder(tf.float32, [8, 64], name="x")
y = tf.placeholder(tf.float32, [8, 16], name="y")
w_big = tf.Variable(rs.uniform(400, 800, (64, 16)).astype(np.float32), name="w_big")
w_small = tf.Variable(rs.normal(0, 0.1, (64, 16)).astype(np.float32), name="w_small")
big = tf.matmul(x, w_big, name="big/MatMul")                 # ~1e5: inf in float16
small = tf.matmul(x, w_small, name="small/MatMul")           # harmless
pred = tf.add(tf.multiply(big, 1e-3, name="big/scale"), small, name="pred")
loss = tf.reduce_mean(tf.square(pred - y), name="loss")
if flags.broken_float32:
    loss = loss * tf.math.log(tf.constant(-1.0))
train_op = tf.train.GradientDescentOptimizer(1e-7).minimize(loss)

config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(flags.steps):
        _, value = sess.run([train_op, loss], {x: x_data, y: y_data})
        if not flags.quiet:
            print(f"step {step} loss = {value:.6f}", flush=True)
