"""npu_bridge.hccl.hccl_ops and hccl.manage.api: collectives, groups, rank helpers, the distributed optimizers.

The names live in runtime/hccl/ (see its package docstring for how ranks find each other and how
collectives run on TensorFlow's collective ops); this module is what `npu_bridge.hccl.hccl_ops`,
`hccl.manage.api`, `hccl.split.api` and npu_init's `hccl_ops` are. With RANK_SIZE 1 (no launcher)
this process is rank 0 of 1 and every collective is an Identity op.
"""

from npu_sim_bridge.runtime import util
from npu_sim_bridge.runtime.hccl import cluster
from npu_sim_bridge.runtime.hccl.collectives import (  # noqa: F401
    allgather,
    allreduce,
    broadcast,
    receive,
    reduce,
    reduce_scatter,
    send,
)
from npu_sim_bridge.runtime.hccl.groups import (  # noqa: F401
    WORLD_GROUP,
    create_group,
    destroy_group,
    get_group_rank_from_world_rank,
    get_local_rank_id,
    get_local_rank_size,
    get_rank_id,
    get_rank_size,
    get_world_rank_from_group_rank,
    set_split_strategy_by_idx,
    set_split_strategy_by_size,
)
from npu_sim_bridge.runtime.hccl.optimizers import (  # noqa: F401
    KerasDistributeOptimizer,
    NPUDistributedOptimizer,
    npu_allreduce,
    npu_distributed_optimizer_wrapper,
    npu_keras_optimizer,
    npu_tf_optimizer,
)


def get_npu_rank_id():
    """The rank init_resource recorded, else this process's rank."""
    return util.get_value("npu_rank_id", cluster.info().rank_id)


def get_npu_local_rank_id():
    """The local rank init_resource recorded, else this process's rank on its server."""
    return util.get_value("npu_local_rank_id", cluster.info().local_rank_id)


def get_npu_rank_size():
    """The rank count init_resource recorded, else RANK_SIZE."""
    return util.get_value("npu_rank_size", cluster.info().rank_size)


def get_npu_local_rank_size():
    """The local rank count init_resource recorded, else the ranks on this server."""
    return util.get_value("npu_local_rank_size", cluster.info().local_rank_size)
