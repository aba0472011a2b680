"""SetIterationsVarHook of npu_bridge.estimator.npu.npu_hook: loads iterations_per_loop when the session starts.

The simulation runs one training step per Session.run whatever iterations_per_loop says (see
runtime/util.py), so the hook checks and records the count and says once that it has no effect.
"""

import warnings

import tensorflow as tf

from npu_sim_bridge.runtime.util import check_positive_integer

_warned = []


class SetIterationsVarHook(tf.compat.v1.train.SessionRunHook):
    """Sets the NPU's loop count at session start; records it here (one step per Session.run in the simulation)."""

    def __init__(self, iterations_per_loop=None):
        if iterations_per_loop is not None:
            check_positive_integer(iterations_per_loop, "iterations_per_loop")
        self.iterations_per_loop = iterations_per_loop

    def after_create_session(self, session, coord):
        if (self.iterations_per_loop or 1) > 1 and not _warned:
            _warned.append(True)
            warnings.warn(f"SetIterationsVarHook(iterations_per_loop={self.iterations_per_loop}): the simulation runs "
                          "one training step per Session.run; the NPU would run that many", UserWarning, stacklevel=2)
