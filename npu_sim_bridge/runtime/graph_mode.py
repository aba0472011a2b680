"""TF1 graph mode for scripts written for npu_bridge, which only ever ran on TensorFlow 1.15.

npu_bridge scripts build graphs with placeholders and run them in `tf.Session`; on TensorFlow 2.15
that needs eager execution off. Importing `npu_sim_bridge.npu_init`, or any `npu_bridge` module
through the alias, calls `enter_tf1_graph_mode()`; the runtime modules themselves never do.
"""

import tensorflow as tf


def enter_tf1_graph_mode():
    """Turn eager execution off (idempotent), as TensorFlow 1.15 runs: graphs and Sessions."""
    tf.compat.v1.disable_eager_execution()
