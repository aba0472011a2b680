"""Session config helpers of npu_bridge.npu_init: add the NpuOptimizer to a ConfigProto, open and close Sessions.

What `npu_config_proto` does to the ConfigProto is what the real adapter does: add a custom
optimizer named NpuOptimizer when there is none (and then turn Grappler's memory_optimization
off), and always set allow_soft_placement, log_device_placement off, remapping off and XLA's
global_jit_level off. One addition: an unset `min_graph_nodes` becomes -1, because Grappler skips
graphs under 4 nodes (the NpuOptimizer would never see them) while the NPU compiles every graph;
a Session config built by hand keeps Grappler's minimum, which the README notes. It mutates the
proto it is given and returns it. Every helper that builds a
Session (init_resource, set_keras_session_npu_config, npu_clear_session, npu_run_config_init,
NPUEstimator) goes through it, so `enable_mixed_precision` reaches all of them.

Sessions the script builds itself (`tf.Session(config=...)`) are not touched: importing npu_init
does NOT make every Session use NpuOptimizer. The newest real adapter does that at import (it
patches Session.__init__); here it is opt-in (a hook of session_hooks.py), `enable_npu_for_all_sessions()` (or the environment
variable NPU_SIM_ALL_SESSIONS=1, or `npu-sim run --all-sessions`), because a simulator process
often needs plain-TensorFlow Sessions too (a float32 baseline to compare against, dumps to compare),
and because the patch rewrites configs the script never handed to the adapter. Unlike the real
patch, the opt-in one works on a copy of the Session's config.
"""

import os
import warnings

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tensorflow.python.client import session as session_lib

from npu_sim_bridge import session_hooks
from npu_sim_bridge.config.options import NPU_OPTIMIZER_NAME, NpuSimConfigWarning
from npu_sim_bridge.config.registry import is_mix_precision
from npu_sim_bridge.runtime.hccl import cluster

ALL_SESSIONS_ENV = "NPU_SIM_ALL_SESSIONS"

# The precision_mode the helpers write when the NpuOptimizer entry sets none (enable_mixed_precision).
_default_precision_mode = None


def set_default_precision_mode(mode):
    """Make the helpers write precision_mode=`mode` where the config sets no precision mode; None to stop."""
    global _default_precision_mode
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"set_default_precision_mode expects a precision_mode name or None, got {mode!r}")
    _default_precision_mode = mode


def default_precision_mode():
    """The precision_mode the helpers write when the config sets none, or None."""
    return _default_precision_mode


def find_npu_optimizer(config_proto):
    """The first custom optimizer named NpuOptimizer in the ConfigProto, or None."""
    for custom_optimizer in config_proto.graph_options.rewrite_options.custom_optimizers:
        if custom_optimizer.name == NPU_OPTIMIZER_NAME:
            return custom_optimizer
    return None


def _check_config_proto(config_proto, function):
    if config_proto is None:
        return config_pb2.ConfigProto()
    if not isinstance(config_proto, config_pb2.ConfigProto):
        raise TypeError(f"{function} expects a tf.compat.v1.ConfigProto or None, got "
                        f"{type(config_proto).__name__}; build one with tf.compat.v1.ConfigProto()")
    return config_proto


def npu_config_proto(config_proto=None):
    """Add the NpuOptimizer to `config_proto` (a new ConfigProto when None) as npu_bridge does; returns it."""
    config_proto = _check_config_proto(config_proto, "npu_config_proto")
    cluster.route_sessions()  # with RANK_SIZE > 1, Sessions run on this rank's server (runtime/hccl/cluster.py)
    rewrite_options = config_proto.graph_options.rewrite_options
    npu_optimizer = find_npu_optimizer(config_proto)
    if npu_optimizer is None:
        npu_optimizer = rewrite_options.custom_optimizers.add()
        npu_optimizer.name = NPU_OPTIMIZER_NAME
        rewrite_options.memory_optimization = RewriterConfig.OFF
    _apply_default_precision_mode(npu_optimizer)
    if rewrite_options.min_graph_nodes == 0:  # Grappler would skip graphs under 4 nodes; the NPU compiles them
        rewrite_options.min_graph_nodes = -1
    config_proto.allow_soft_placement = True
    config_proto.log_device_placement = False
    rewrite_options.remapping = RewriterConfig.OFF
    config_proto.graph_options.optimizer_options.global_jit_level = config_pb2.OptimizerOptions.OFF
    return config_proto


def _apply_default_precision_mode(npu_optimizer):
    mode = _default_precision_mode
    if mode is None:
        return
    parameters = npu_optimizer.parameter_map
    if "precision_mode" not in parameters and "precision_mode_v2" not in parameters:
        parameters["precision_mode"].s = mode.encode("utf-8")
        return
    field = "precision_mode" if "precision_mode" in parameters else "precision_mode_v2"
    attr = parameters[field]
    given = attr.s.decode("utf-8", errors="replace") if attr.WhichOneof("value") == "s" else None
    if given is not None and not is_mix_precision(given):
        warnings.warn(
            f"enable_mixed_precision asked for {mode}, but the ConfigProto sets {field} {given!r}, which is kept; "
            f"remove {field} from the NpuOptimizer parameter_map to get mixed precision",
            NpuSimConfigWarning, stacklevel=3)


def npu_graph_options(graph_options=None):
    """`graph_options` (a new GraphOptions when None) with XLA's global_jit_level off, as npu_bridge sets it."""
    if graph_options is None:
        graph_options = config_pb2.GraphOptions()
    elif not isinstance(graph_options, config_pb2.GraphOptions):
        raise TypeError(f"npu_graph_options expects a tf.compat.v1.GraphOptions or None, got "
                        f"{type(graph_options).__name__}")
    graph_options.optimizer_options.global_jit_level = config_pb2.OptimizerOptions.OFF
    return graph_options


def npu_optimizer_options(optimizer_options=None):
    """`optimizer_options` (a new OptimizerOptions when None) with XLA's global_jit_level off."""
    if optimizer_options is None:
        optimizer_options = config_pb2.OptimizerOptions()
    elif not isinstance(optimizer_options, config_pb2.OptimizerOptions):
        raise TypeError(f"npu_optimizer_options expects a tf.compat.v1.OptimizerOptions or None, got "
                        f"{type(optimizer_options).__name__}")
    optimizer_options.global_jit_level = config_pb2.OptimizerOptions.OFF
    return optimizer_options


def init_resource(config=None):
    """Open a Session with the NpuOptimizer on the default graph and "initialize the NPU system" in it.

    Returns (session, shutdown_op) as npu_bridge does; pass both to shutdown_resource, then the
    session to close_session. `config` is mutated by npu_config_proto. In the simulation the
    initialize and shutdown ops are no-ops; the rank values it records are this process's
    (runtime/hccl: RANK_ID, RANK_SIZE).
    """
    from npu_sim_bridge.runtime import npu_ops, util
    from npu_sim_bridge.runtime.distributed import (get_local_rank_id, get_local_rank_size, get_rank_id,
                                                    get_rank_size)

    config = npu_config_proto(_check_config_proto(config, "init_resource"))
    util.global_dict_init()
    npu_init = npu_ops.initialize_system()
    npu_shutdown = npu_ops.shutdown_system()
    sess = session_lib.Session(config=config)
    sess.run(npu_init)
    util.set_value("npu_rank_id", get_rank_id())
    util.set_value("npu_local_rank_id", get_local_rank_id())
    util.set_value("npu_rank_size", get_rank_size())
    util.set_value("npu_local_rank_size", get_local_rank_size())
    return sess, npu_shutdown


def shutdown_resource(sess, npu_shutdown):
    """Run the shutdown op init_resource returned."""
    sess.run(npu_shutdown)


def close_session(sess):
    """Close the Session."""
    sess.close()


# ---------------------------------------------------------------------------------------------------
# Opt-in: every Session gets the NpuOptimizer (what the newest npu_bridge does at import).

_PATCHED_CLASSES = (session_lib.Session, session_lib.InteractiveSession)


def _npu_for_every_session(session, target, config):
    if not isinstance(session, _PATCHED_CLASSES):
        return target, config
    npu_config = config_pb2.ConfigProto()
    if config is not None:
        npu_config.CopyFrom(_check_config_proto(config, type(session).__name__))
    return target, npu_config_proto(npu_config)


def enable_npu_for_all_sessions():
    """Make every new tf.compat.v1.Session / InteractiveSession use the NpuOptimizer (on a copy of its config).

    Undo with disable_npu_for_all_sessions(). Calling it twice is harmless.
    """
    session_hooks.add("all_sessions", session_hooks.ALL_SESSIONS, _npu_for_every_session)


def disable_npu_for_all_sessions():
    """Undo enable_npu_for_all_sessions(): new Sessions use the config they are given, unchanged."""
    session_hooks.remove("all_sessions")


def npu_for_all_sessions_enabled():
    """True while enable_npu_for_all_sessions() is in effect."""
    return session_hooks.active("all_sessions")


def enable_from_environment(environ=None):
    """enable_npu_for_all_sessions() when NPU_SIM_ALL_SESSIONS is 1/true/yes; returns whether it did."""
    environ = os.environ if environ is None else environ
    value = environ.get(ALL_SESSIONS_ENV, "").strip().lower()
    if value in ("1", "true", "yes"):
        enable_npu_for_all_sessions()
        return True
    if value not in ("", "0", "false", "no"):
        raise ValueError(f"environment variable {ALL_SESSIONS_ENV}={value!r} is invalid, it should be 1 or 0")
    return False
