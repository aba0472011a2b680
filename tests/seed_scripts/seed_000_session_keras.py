"""Seed 000 (setting the precision mode), Session and Keras snippets, pasted as they stand.

Lines marked "elided" stand in for what the manual leaves out; everything else is the seed's text.
Prints one `SEED ...` line per snippet with the number of graphs the NpuOptimizer rewrote so far.
"""
import types

import numpy as np
import tensorflow as tf
import tensorflow.python.keras as keras
from tensorflow.python.keras import backend as K
from npu_bridge.npu_init import *

import npu_sim_bridge


def rewrites():
    return len(npu_sim_bridge.recent_reports())


# elided: the lookup table and model the script initializes (a TF 1.x table had .init)
_table = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(tf.constant([1, 2], tf.int64), tf.constant([10, 20], tf.int64)), -1)
interaction_table = types.SimpleNamespace(init=_table.initializer)
weights = tf.get_variable("weights", [4, 2], initializer=tf.ones_initializer())
bias = tf.get_variable("bias", [2], initializer=tf.zeros_initializer())

with tf.Session(config=npu_config_proto()) as sess:
    sess.run(tf.global_variables_initializer())
    interaction_table.init.run()
print("SEED 000 session npu_config_proto() rewrites", rewrites())

config_proto = tf.ConfigProto()
custom_op = config_proto.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = 'NpuOptimizer'
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
config = npu_config_proto(config_proto=config_proto)
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    interaction_table.init.run()
print("SEED 000 session npu_config_proto(config_proto) rewrites", rewrites())

# elided: data and model of the Keras snippets
x_data = np.random.RandomState(0).rand(64, 4).astype(np.float32)
y_data = x_data.sum(axis=1, keepdims=True)


def keras_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    return model


npu_keras_sess = set_keras_session_npu_config()
#数据预处理... / 模型搭建... / 模型编译... / 模型训练... (elided)
history = keras_model().fit(x_data, y_data, epochs=2, batch_size=16, verbose=0)
print("SEED 000 keras set_keras_session_npu_config() rewrites", rewrites(), "loss", history.history["loss"][-1])

config_proto = tf.ConfigProto()
custom_op = config_proto.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = 'NpuOptimizer'
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
npu_keras_sess = set_keras_session_npu_config(config=config_proto)
history = keras_model().fit(x_data, y_data, epochs=2, batch_size=16, verbose=0)
print("SEED 000 keras set_keras_session_npu_config(config) rewrites", rewrites(), "loss", history.history["loss"][-1])
npu_keras_sess.close()
