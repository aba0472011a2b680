"""Session hooks and Keras callbacks migrated scripts add (npu_hooks_append, npu_callbacks_append, ...).

With one rank the variable broadcast from rank 0 has nothing to do, so the broadcast hook and
callback only check their arguments. NPUCheckpointSaverHook is TensorFlow's CheckpointSaverHook.
"""

import tensorflow as tf


class NpuEmptyHook(tf.compat.v1.train.SessionRunHook):
    """A hook that does nothing (npu_init's NpuEmptyHook)."""


class NPUBroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts the global variables from root_rank when the session starts; nothing to do with one rank."""

    def __init__(self, root_rank=None, index=None):
        if root_rank not in (None, 0):
            raise ValueError(f"root_rank {root_rank}: the simulation runs a single process, rank 0 of 1")
        self._root_rank = root_rank
        self._index = index


class NPUCheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """npu_bridge's checkpoint hook: TensorFlow's CheckpointSaverHook."""


class NPUBroadcastGlobalVariablesCallback(tf.keras.callbacks.Callback):
    """Keras callback broadcasting the variables from root_rank; nothing to do with one rank."""

    def __init__(self, root_rank=0):
        super().__init__()
        if root_rank != 0:
            raise ValueError(f"root_rank {root_rank}: the simulation runs a single process, rank 0 of 1")
        self.root_rank = root_rank


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
