"""Session hooks and Keras callbacks migrated scripts add (npu_hooks_append, npu_callbacks_append, ...).

NPUBroadcastGlobalVariablesHook builds, in `begin`, one op that overwrites every global variable
with its value on the root rank, and runs it once the Session exists (after initialization or a
checkpoint restore), so ranks that start from different random values train from the same ones.
NPUBroadcastGlobalVariablesCallback does the same for Keras before the first batch, in Keras's
Session. With one rank both do nothing. NPUCheckpointSaverHook is TensorFlow's CheckpointSaverHook.
"""

import tensorflow as tf

from npu_sim_bridge.runtime.hccl import groups
from npu_sim_bridge.runtime.hccl.broadcast import broadcast_global_variables


class NpuEmptyHook(tf.compat.v1.train.SessionRunHook):
    """A hook that does nothing (npu_init's NpuEmptyHook)."""


class NPUBroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts the global variables from root_rank (default 0) when the Session has been created."""

    def __init__(self, root_rank=None, index=None):
        self._root_rank = 0 if root_rank is None else root_rank
        groups.check_group_rank(groups.WORLD_GROUP, self._root_rank, "root_rank")
        self._index = index
        self._bcast_op = None

    def begin(self):
        if groups.get_rank_size() == 1:
            return  # one rank: nothing to broadcast, nothing added to the graph
        if self._bcast_op is None or self._bcast_op.graph is not tf.compat.v1.get_default_graph():
            self._bcast_op = broadcast_global_variables(self._root_rank)

    def after_create_session(self, session, coord):
        if self._bcast_op is not None:
            session.run(self._bcast_op)


class NPUCheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """npu_bridge's checkpoint hook: TensorFlow's CheckpointSaverHook."""


class NPUBroadcastGlobalVariablesCallback(tf.keras.callbacks.Callback):
    """Keras callback broadcasting the global variables from root_rank before the first batch."""

    def __init__(self, root_rank=0):
        super().__init__()
        groups.check_group_rank(groups.WORLD_GROUP, root_rank, "root_rank")
        self.root_rank = root_rank
        self.broadcast_done = False

    def on_batch_begin(self, batch, logs=None):
        if self.broadcast_done:
            return
        if groups.get_rank_size() > 1:
            session = tf.compat.v1.keras.backend.get_session()
            with session.graph.as_default():
                session.run(broadcast_global_variables(self.root_rank))
        self.broadcast_done = True


def npu_hooks_append(hooks_list=()):
    """`hooks_list` (a new list unless it is a list) with an NPUBroadcastGlobalVariablesHook appended."""
    if not isinstance(hooks_list, list):
        hooks_list = []
    hooks_list.append(NPUBroadcastGlobalVariablesHook(0, 0))
    return hooks_list


def npu_callbacks_append(callbacks_list=()):
    """`callbacks_list` (a new list unless it is a list) with an NPUBroadcastGlobalVariablesCallback appended."""
    if not isinstance(callbacks_list, list):
        callbacks_list = []
    callbacks_list.append(NPUBroadcastGlobalVariablesCallback(0))
    return callbacks_list
