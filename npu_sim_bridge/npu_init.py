"""Drop-in for npu_bridge.npu_init: `from npu_sim_bridge.npu_init import *` gives the names migrated scripts use.

Like the real module it has no `__all__`, so a star import brings every public name, including
`tf`, `RewriterConfig`, `config_pb2`, `npu_scope`, `util`, `npu_ops` and `hccl_ops`. npu_bridge
only ever ran on TensorFlow 1.15, so two things make a script written for it run unchanged on
TensorFlow 2.15: `tf` here is the TF1 API (the names of `tensorflow.compat.v1` plus `tf.contrib`,
see npu_sim_bridge/tf1compat; a star import after `import tensorflow as tf` replaces the script's `tf` with
it, as the real module's star import does), and importing this module turns eager execution off
(TF1 graph mode). Use `npu_sim_bridge.runtime.*` for the same helpers without that switch.

Importing it does NOT make every Session use the NpuOptimizer (the newest real adapter patches
Session.__init__ to do so): call enable_npu_for_all_sessions() or set NPU_SIM_ALL_SESSIONS=1.
See npu_sim_bridge/runtime/session.py for the reasons.
"""

import os  # noqa: F401  (npu_bridge.npu_init exports it)

from tensorflow.core.protobuf import config_pb2  # noqa: F401
from tensorflow.core.protobuf import rewriter_config_pb2  # noqa: F401
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig
from tensorflow.python.client import session  # noqa: F401
from tensorflow.python.keras import backend  # noqa: F401
from tensorflow.python.training import session_run_hook  # noqa: F401

import npu_sim_bridge  # noqa: F401  (registers the NpuOptimizer with Grappler)
from npu_sim_bridge.runtime import distributed as hccl_ops  # noqa: F401
from npu_sim_bridge.runtime import keras_to_npu  # noqa: F401
from npu_sim_bridge.runtime import npu_ops  # noqa: F401
from npu_sim_bridge.runtime import npu_plugin  # noqa: F401
from npu_sim_bridge.runtime import npu_strategy  # noqa: F401
from npu_sim_bridge.runtime import scopes as npu_scope  # noqa: F401
from npu_sim_bridge.runtime import util  # noqa: F401
from npu_sim_bridge.runtime.config_parts import (  # noqa: F401
    DynamicInputConfig,
    ExperimentalConfig,
    GraphMemoryOptimizeConfig,
    MemoryConfig,
    ProfilingConfig,
)
from npu_sim_bridge.runtime.distributed import (  # noqa: F401
    KerasDistributeOptimizer,
    NPUDistributedOptimizer,
    create_group,
    destroy_group,
    get_group_rank_from_world_rank,
    get_local_rank_id,
    get_local_rank_size,
    get_npu_local_rank_id,
    get_npu_local_rank_size,
    get_npu_rank_id,
    get_npu_rank_size,
    get_rank_id,
    get_rank_size,
    get_world_rank_from_group_rank,
    npu_allreduce,
    npu_distributed_optimizer_wrapper,
    npu_keras_optimizer,
    npu_tf_optimizer,
    set_split_strategy_by_idx,
    set_split_strategy_by_size,
)
from npu_sim_bridge.runtime.dump_config import DumpConfig  # noqa: F401
from npu_sim_bridge.runtime.estimator import (  # noqa: F401
    NPUEstimator,
    NPUEstimatorSpec,
    NPURunConfig,
    npu_run_config_init,
)
from npu_sim_bridge.runtime.graph_mode import enter_tf1_graph_mode as _enter_tf1_graph_mode
from npu_sim_bridge.runtime.hccl.cluster import route_sessions as _route_sessions
from npu_sim_bridge.runtime.hooks import (  # noqa: F401
    NPUBroadcastGlobalVariablesCallback,
    NPUBroadcastGlobalVariablesHook,
    NPUCheckpointSaverHook,
    NpuEmptyHook,
    npu_callbacks_append,
    npu_hooks_append,
)
from npu_sim_bridge.runtime.keras import npu_clear_session, set_keras_session_npu_config  # noqa: F401
from npu_sim_bridge.runtime.loss_scale import (  # noqa: F401
    ExponentialUpdateLossScaleManager,
    FixedLossScaleManager,
    NPULossScaleOptimizer,
)
from npu_sim_bridge.runtime.loss_scale import register_tf1_contrib as _register_tf1_contrib
from npu_sim_bridge.runtime.npu_optimizer import NPUOptimizer  # noqa: F401
from npu_sim_bridge.runtime.npu_plugin import npu_close  # noqa: F401
from npu_sim_bridge.runtime.npu_unary_ops import npu_unary_ops  # noqa: F401
from npu_sim_bridge.runtime.mixed_precision import disable_mixed_precision, enable_mixed_precision  # noqa: F401
from npu_sim_bridge.runtime.scopes import NpuExecutePlacement  # noqa: F401
from npu_sim_bridge.runtime.session import (  # noqa: F401
    close_session,
    disable_npu_for_all_sessions,
    enable_npu_for_all_sessions,
    init_resource,
    npu_config_proto,
    npu_graph_options,
    npu_optimizer_options,
    shutdown_resource,
)
from npu_sim_bridge.runtime.session import enable_from_environment as _enable_from_environment
from npu_sim_bridge.tf1compat.view import tf1_module as _tf1_module

_register_tf1_contrib()  # tf.contrib.mixed_precision is the loss scaling above
tf = _tf1_module()  # TensorFlow 1.15's API: tf.compat.v1's names plus tf.contrib (npu_sim_bridge.tf1compat)

experimental_options = {
    "disable_model_pruning": False,
    "function_optimization": RewriterConfig.ON,
    "constant_folding": RewriterConfig.ON,
    "shape_optimization": RewriterConfig.ON,
    "arithmetic_optimization": RewriterConfig.ON,
    "loop_optimization": RewriterConfig.ON,
    "dependency_optimization": RewriterConfig.ON,
    "layout_optimizer": RewriterConfig.ON,
}

_enter_tf1_graph_mode()
_enable_from_environment()
_route_sessions()  # with RANK_SIZE > 1: every Session runs on this rank's TensorFlow server (runtime/hccl)

# The real npu_init has no __all__: its star import gives every public name, modules included (`tf`,
# `util`, `npu_ops`, `hccl_ops`, `os`, ...). Said here, so that the alias's rule for the other npu_bridge
# modules (runtime/star_exports.py: no imported modules) leaves npu_init's star import as it is.
__all__ = sorted(name for name in globals() if not name.startswith("_"))
