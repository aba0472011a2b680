"""npu_bridge.estimator.npu.npu_strategy: NPUStrategy, a one-device tf.distribute strategy per rank.

As in the adapter, it is TensorFlow's one-device strategy whose distributed datasets are this rank's
shard (dataset.shard(rank size, rank id)) and whose replica count is the rank size; rank size and id
come from runtime/distributed.py, so they follow whatever ranks the simulation runs.
"""

from tensorflow.python.distribute import distribute_lib, one_device_strategy

from npu_sim_bridge.runtime import distributed


class NPUExtended(one_device_strategy.OneDeviceExtended):
    """OneDeviceExtended that shards datasets by rank and counts every rank as a replica."""

    def _experimental_distribute_dataset(self, dataset, options=None):  # pylint: disable=arguments-differ
        return dataset.shard(distributed.get_rank_size(), distributed.get_rank_id())

    @property
    def _num_replicas_in_sync(self):
        return distributed.get_rank_size()


class NPUStrategy(distribute_lib.StrategyV1):
    """tf.distribute strategy of npu_bridge (for Estimator's train_distribute and Keras in TF1 graph mode)."""

    def __init__(self, device="/cpu:0"):
        super().__init__(NPUExtended(self, device))
