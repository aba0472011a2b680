"""Rank 1 raises after one all-reduce while rank 0 waits in the next: the launch must end with rank 1's error."""

from npu_bridge.npu_init import *  # noqa: F401,F403
from npu_bridge.hccl import hccl_ops

first = hccl_ops.allreduce(tf.constant(1.0), "sum")
second = hccl_ops.allreduce(tf.constant(2.0), "sum")
with tf.Session(config=npu_config_proto()) as sess:
    print("first all-reduce gives", sess.run(first))
    if get_rank_id() == 1:
        raise ValueError("rank 1 fails on purpose after its first step")
    sess.run(second)  # never completes: rank 1 is gone
