"""Distributed training in a single process: rank helpers, HCCL collectives and the distributed optimizers.

The simulation runs one process, which is rank 0 of a group of size 1 (whatever RANK_SIZE says).
With one rank every collective is the identity (all-reduce sums or averages one value, all-gather
and broadcast return the input), so:
- hccl_ops' allreduce / allgather / broadcast / reduce / reduce_scatter return their input (as an
  Identity op, so graph structure stays visible); send/receive have no peer and raise.
- NPUDistributedOptimizer, npu_distributed_optimizer_wrapper, npu_tf_optimizer, npu_keras_optimizer
  and KerasDistributeOptimizer return gradients unchanged: npu_distributed_optimizer_wrapper,
  npu_tf_optimizer and npu_keras_optimizer give back the optimizer itself; NPUDistributedOptimizer
  is a tf.compat.v1.train.Optimizer that forwards to the one it wraps.
"""

import tensorflow as tf

from npu_sim_bridge.runtime import util

WORLD_GROUP = "hccl_world_group"


# ---------------------------------------------------------------------------------------------------
# Rank helpers (hccl.manage.api and npu_init's get_npu_*).


def _check_group(group):
    if group != WORLD_GROUP and group not in _groups:
        raise ValueError(f"HCCL group {group!r} does not exist; create it with create_group first "
                         f"(the world group is {WORLD_GROUP!r})")


def get_rank_size(group=WORLD_GROUP):
    """Ranks in the group: 1."""
    _check_group(group)
    return 1


def get_local_rank_size(group=WORLD_GROUP):
    """Ranks of the group on this server: 1."""
    _check_group(group)
    return 1


def get_rank_id(group=WORLD_GROUP):
    """This process's rank in the group: 0."""
    _check_group(group)
    return 0


def get_local_rank_id(group=WORLD_GROUP):
    """This process's rank on this server: 0."""
    _check_group(group)
    return 0


def get_world_rank_from_group_rank(group, group_rank_id):
    """The world rank of a group rank: 0 for 0 (the only rank)."""
    _check_group(group)
    _check_rank(group_rank_id)
    return 0


def get_group_rank_from_world_rank(world_rank_id, group):
    """The group rank of a world rank: 0 for 0 (the only rank)."""
    _check_group(group)
    _check_rank(world_rank_id)
    return 0


def _check_rank(rank):
    if rank != 0:
        raise ValueError(f"rank {rank} does not exist: the simulation runs a single process, rank 0 of 1")


_groups = {}


def create_group(group, rank_num, rank_ids):
    """Create an HCCL group; in a single process it can only hold rank 0."""
    if list(rank_ids) != [0] or rank_num != 1:
        raise ValueError(f"HCCL group {group!r} with ranks {list(rank_ids)}: the simulation runs a single process, "
                         "so a group can only be [0] with rank_num 1")
    _groups[group] = [0]


def destroy_group(group):
    """Destroy a group create_group made."""
    if group not in _groups:
        raise ValueError(f"HCCL group {group!r} does not exist")
    del _groups[group]


def set_split_strategy_by_idx(idx_list, group=WORLD_GROUP):
    """Gradient split strategy for all-reduce fusion: accepted, no effect with one rank."""
    _check_group(group)


def set_split_strategy_by_size(data_size_list, group=WORLD_GROUP):
    """Gradient split strategy for all-reduce fusion: accepted, no effect with one rank."""
    _check_group(group)


def get_npu_rank_id():
    """The rank init_resource recorded (0)."""
    return util.get_value("npu_rank_id", 0)


def get_npu_local_rank_id():
    """The local rank init_resource recorded (0)."""
    return util.get_value("npu_local_rank_id", 0)


def get_npu_rank_size():
    """The rank count init_resource recorded (1)."""
    return util.get_value("npu_rank_size", 1)


def get_npu_local_rank_size():
    """The local rank count init_resource recorded (1)."""
    return util.get_value("npu_local_rank_size", 1)


# ---------------------------------------------------------------------------------------------------
# HCCL collectives (npu_bridge.hccl.hccl_ops) with one rank.

_REDUCTIONS = ("sum", "prod", "max", "min")


def _identity(tensor, name):
    if isinstance(tensor, (list, tuple)):
        return [tf.identity(item, name=name) for item in tensor]
    return tf.identity(tensor, name=name)


def _check_reduction(reduction, allowed=_REDUCTIONS):
    if reduction not in allowed:
        raise ValueError(f"reduction {reduction!r} is invalid, it should be one of: {', '.join(allowed)}")


def allreduce(tensor, reduction, fusion=1, fusion_id=-1, group=WORLD_GROUP):
    """All-reduce over one rank: the input."""
    _check_reduction(reduction)
    _check_group(group)
    return _identity(tensor, "HcomAllReduce")


def allgather(tensor, rank_size, group=WORLD_GROUP, fusion=0, fusion_id=-1):
    """All-gather over one rank: the input."""
    _check_group(group)
    if rank_size != 1:
        raise ValueError(f"allgather rank_size {rank_size}: the simulation runs a single process, use 1")
    return _identity(tensor, "HcomAllGather")


def broadcast(tensor, root_rank, fusion=2, fusion_id=0, group=WORLD_GROUP):
    """Broadcast from rank 0 over one rank: the inputs (a list, as npu_bridge takes and returns)."""
    _check_group(group)
    _check_rank(root_rank)
    return _identity(list(tensor) if isinstance(tensor, (list, tuple)) else [tensor], "HcomBroadcast")


def reduce(tensor, reduction, root_rank, fusion=0, fusion_id=-1, group=WORLD_GROUP):
    """Reduce to rank 0 over one rank: the input."""
    _check_rank(root_rank)
    return allreduce(tensor, reduction, group=group)


def reduce_scatter(tensor, reduction, rank_size, group=WORLD_GROUP, fusion=0, fusion_id=-1):
    """Reduce-scatter over one rank: the input."""
    if rank_size != 1:
        raise ValueError(f"reduce_scatter rank_size {rank_size}: the simulation runs a single process, use 1")
    return allreduce(tensor, reduction, group=group)


def send(tensor, sr_tag, dest_rank, group=WORLD_GROUP):
    """Point-to-point send: there is no other rank in a single process."""
    raise ValueError(f"send to rank {dest_rank}: the simulation runs a single process, rank 0 of 1, with no peer")


def receive(shape, data_type, sr_tag, src_rank, group=WORLD_GROUP):
    """Point-to-point receive: there is no other rank in a single process."""
    raise ValueError(f"receive from rank {src_rank}: the simulation runs a single process, rank 0 of 1, with no peer")


def npu_allreduce(values, reduction="mean", fusion=1, fusion_id=-1, group=WORLD_GROUP):
    """npu_bridge's all-reduce of a value or list of values, mean or sum: the input with one rank."""
    _check_reduction(reduction, ("mean",) + _REDUCTIONS)
    _check_group(group)
    if isinstance(values, (list, tuple)):
        return [_identity(value, "npu_allreduce") for value in values]
    return _identity(values, "npu_allreduce")


# ---------------------------------------------------------------------------------------------------
# Distributed optimizers with one rank.


class NPUDistributedOptimizer(tf.compat.v1.train.Optimizer):
    """Averages gradients over the ranks before applying them; with one rank it forwards to `optimizer`."""

    def __init__(self, optimizer, is_weight_update_sharding=False, name=None):
        if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
            raise TypeError(f"NPUDistributedOptimizer wraps a tf.compat.v1.train.Optimizer, got "
                            f"{type(optimizer).__name__}; for a Keras optimizer use npu_keras_optimizer")
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}", use_locking=False)
        self._optimizer = optimizer
        self._is_weight_update_sharding = is_weight_update_sharding

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._optimizer.variables()


def npu_distributed_optimizer_wrapper(optimizer):
    """The optimizer itself (a Keras optimizer name is resolved first): all-reduce is the identity with one rank."""
    if isinstance(optimizer, str):
        optimizer = tf.keras.optimizers.get(optimizer)
    return optimizer


def npu_tf_optimizer(opt):
    """NPUDistributedOptimizer(opt)."""
    return NPUDistributedOptimizer(opt)


def npu_keras_optimizer(opt):
    """The Keras optimizer itself: all-reduce is the identity with one rank."""
    return npu_distributed_optimizer_wrapper(opt)


def KerasDistributeOptimizer(optimizer, name="NpuKerasOptimizer", **kwargs):  # noqa: N802 - npu_bridge's name
    """npu_bridge's Keras all-reduce wrapper: the optimizer itself with one rank."""
    return npu_distributed_optimizer_wrapper(optimizer)
