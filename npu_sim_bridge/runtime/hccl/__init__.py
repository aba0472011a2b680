"""Multi-rank training on TensorFlow's collective ops and gRPC runtime: what hccl_ops and the rank helpers run on.

One process per rank, started by `npu-sim launch` or by hand with RANK_ID, RANK_SIZE (and
optionally DEVICE_ID, RANK_TABLE_FILE, NPU_SIM_PORT_BASE). With RANK_SIZE 1 nothing here starts.

  ranktable.py    the rank environment and Ascend's version 1.0 rank table (read and generate)
  cluster.py      this rank's tf.distribute.Server; Sessions routed through it (target and config)
  peer_exits.py   ranks that ended while peers run: the connect and a waiting collective stop at once
  groups.py       the world group, create_group, rank queries, collective group keys
  collectives.py  allreduce, allgather, broadcast, reduce, reduce_scatter, send, receive
  optimizers.py   NPUDistributedOptimizer, npu_distributed_optimizer_wrapper, npu_allreduce
  broadcast.py    broadcast_global_variables (the broadcast hook and callback build on it)
"""
