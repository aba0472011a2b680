"""tf.keras in a TF1 Session fed by Dataset.make_one_shot_iterator(), with the NpuOptimizer (TF 1.15 style)."""
import numpy as np
import tensorflow as tf
from tensorflow.python.keras import backend as K
from npu_bridge.npu_init import *

import npu_sim_bridge

tf.set_random_seed(0)
x = np.random.RandomState(0).rand(64, 4).astype(np.float32)
y = x.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
features, labels = dataset.make_one_shot_iterator().get_next()

config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
sess = tf.Session(config=config)
K.set_session(sess)

model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)),
    tf.keras.layers.Dense(1),
])
model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
history = model.fit(features, labels, epochs=3, steps_per_epoch=4, verbose=0)
losses = history.history["loss"]
print("TF1 keras loss_first", round(losses[0], 4), "loss_last", round(losses[-1], 4),
      "rewrites", len(npu_sim_bridge.recent_reports()))
sess.close()
