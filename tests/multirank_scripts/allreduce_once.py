"""Prints this rank's view of one all-reduce: started by hand with RANK_ID / RANK_SIZE / RANK_TABLE_FILE."""

from npu_bridge.npu_init import *  # noqa: F401,F403
from npu_bridge.hccl import hccl_ops

total = hccl_ops.allreduce(tf.constant(float(get_rank_id() + 1)), "sum")
with tf.Session(config=npu_config_proto()) as sess:
    print(f"rank {get_rank_id()} of {get_rank_size()} local {get_local_rank_id()}: sum {sess.run(total)}")
