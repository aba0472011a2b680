"""Seed 003 (enable_mixed_precision_graph_rewrite), its example pasted as it stands, then the npu_bridge form.

The first half is TensorFlow's own GPU graph rewrite example with npu_init's `tf` (which leaves a
CPU graph untouched); the second half is the same model with the simulator's counterparts:
set_keras_session_npu_config() and enable_mixed_precision(opt).
"""
import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *

import npu_sim_bridge

model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(64, activation='relu'),
    tf.keras.layers.Dense(64, activation='softmax'),
])

opt = tf.keras.optimizers.SGD()
opt = tf.train.experimental.enable_mixed_precision_graph_rewrite(opt)
model.compile(loss="mse", optimizer=opt)

x_train = np.random.random((1024, 64))
y_train = np.random.random((1024, 64))
model.fit(x_train, y_train)
print("SEED 003 as it stands, optimizer", type(opt).__name__)
tf.train.experimental.disable_mixed_precision_graph_rewrite()

# The same with the simulator: an NPU Keras session, allow_mix_precision and NPU loss scaling.
model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(64, activation='relu'),
    tf.keras.layers.Dense(64, activation='softmax'),
])
opt = tf.keras.optimizers.SGD()
opt = enable_mixed_precision(opt)
npu_keras_sess = set_keras_session_npu_config()
model.compile(loss="mse", optimizer=opt)
model.fit(x_train, y_train, verbose=0)
print("SEED 003 npu form, optimizer", type(opt).__name__, "precision_mode",
      npu_sim_bridge.last_report().options["precision_mode"], "rewrites", len(npu_sim_bridge.recent_reports()))
disable_mixed_precision()
