"""A host-embedding script's address step: EmbeddingRankId over an address table, tf_adapter's data type numbers."""
import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *
from npu_bridge.npu_cpu.npu_cpu_ops import embeddingrankid
from npu_bridge import tf_adapter

table = tf.placeholder(tf.uint64, shape=[2, 3], name="host_params_address")  # (rank, base address, bytes)
ids = tf.placeholder(tf.int32, shape=[None])
spread = embeddingrankid(table, ids, row_memory=320)
blocks = embeddingrankid(table, ids, row_memory=320, mode="order")
feed = {table: np.array([[0, 4096, 3200], [8, 65536, 3200]], np.uint64), ids: [0, 1, 5, 19]}
with tf.Session(config=npu_config_proto()) as sess:
    by_mod, by_order = sess.run([spread, blocks], feed)
    try:
        sess.run(spread, {table: feed[table], ids: [20]})
    except tf.errors.InvalidArgumentError as error:
        beyond = "beyond the rows its server holds" in error.message
print("HOST mod", by_mod.tolist(), "order", by_order.tolist(), "beyond", beyond)
print("HOST dtype", tf_adapter.DT_FLOAT, tf_adapter.DT_INT64, tf_adapter.tf_dtype(tf_adapter.DT_FLOAT16).name)
