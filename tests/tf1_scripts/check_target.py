"""A TF 1.15 script with one API npu-sim lacks: `npu-sim check` names it at the line where `npu-sim run` stops."""
import tensorflow as tf
from npu_bridge.npu_init import npu_config_proto

tokens = tf.placeholder(tf.int32, [None, 4])
embedded = tf.contrib.layers.embed_sequence(tokens, vocab_size=10, embed_dim=3)
tf.contrib.cloud.BigtableClient("project", "instance")
tf.contrib.quantize.create_training_graph()
print("CHECK_TARGET built", embedded.shape.as_list(), npu_config_proto() is not None)
