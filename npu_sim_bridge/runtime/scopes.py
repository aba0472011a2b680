"""npu_scope: context managers that tag the ops created inside them with node attrs the NpuOptimizer passes read.

- without_npu_compile_scope(): bool attr `_without_npu_compile` = True; mixed compute
  (mix_compile_mode) keeps those ops on the host. It also sets `_grappler_do_not_remove`, because
  Grappler's own optimizers run before NpuOptimizer and would otherwise fold away or fuse scoped
  ops (x*1 and x+0 of the mixed-compute manual's example) and their scope attribute with them.
- keep_dtype_scope(): bool attr `_keep_dtype` = True; the precision rewrite never changes their
  dtype. (The real adapter writes this one as the int 1; this simulator writes a bool, which is
  what its precision pass reads.)
The other scopes of npu_bridge's npu_scope are accepted and tag ops the same way; the simulation
does not act on their attrs.
"""

import contextlib
import enum

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from npu_sim_bridge.graph.attr_names import DO_NOT_REMOVE_ATTR, KEEP_DTYPE_ATTR, WITHOUT_NPU_COMPILE_ATTR  # noqa: F401 (read from here too)


class NpuExecutePlacement(enum.Enum):
    """Where npu_variable_scope places variables."""

    ALL = "all"
    CUBE = "cube"
    VECTOR = "vector"
    TAISHAN = "taishan"
    DVPP = "dvpp"
    HOST = "host"


@contextlib.contextmanager
def _attr_scope(attrs):
    graph = tf.compat.v1.get_default_graph()
    with graph._attr_scope(attrs):  # pylint: disable=protected-access
        yield


def without_npu_compile_scope():
    """Ops created inside run on the host in mixed compute (bool attr _without_npu_compile)."""
    return _attr_scope({WITHOUT_NPU_COMPILE_ATTR: attr_value_pb2.AttrValue(b=True),
                        DO_NOT_REMOVE_ATTR: attr_value_pb2.AttrValue(b=True)})


def keep_dtype_scope():
    """Ops created inside keep their original dtype under every precision mode (bool attr _keep_dtype)."""
    return _attr_scope({KEEP_DTYPE_ATTR: attr_value_pb2.AttrValue(b=True)})


def npu_variable_scope(placement=NpuExecutePlacement.ALL):
    """Tag ops with `_variable_placement` (accepted, no effect in simulation)."""
    if not isinstance(placement, NpuExecutePlacement):
        raise ValueError(f"placement must be an NpuExecutePlacement member, got {placement!r}")
    return _attr_scope({"_variable_placement": attr_value_pb2.AttrValue(s=placement.value.encode())})


def npu_stage_scope(stage):
    """Tag ops with `_stage_level` (accepted, no effect in simulation)."""
    return _attr_scope({"_stage_level": attr_value_pb2.AttrValue(i=stage)})


def npu_mem_type_scope():
    """Tag ops with `_output_memory_type` (accepted, no effect in simulation)."""
    return _attr_scope({"_output_memory_type": attr_value_pb2.AttrValue(i=1)})


def npu_weight_prefetch_scope(buffer_pool_id=0, buffer_pool_size=536870912):
    """Tag ops with the buffer-pool attrs (accepted, no effect in simulation)."""
    return _attr_scope({"_buffer_pool_id": attr_value_pb2.AttrValue(i=buffer_pool_id),
                        "_buffer_pool_size": attr_value_pb2.AttrValue(i=buffer_pool_size)})


def op_specified_engine_scope(engine_name, kernel_lib_name):
    """Tag ops with the engine attrs (accepted, no effect in simulation)."""
    return _attr_scope({"_specified_engine_name": attr_value_pb2.AttrValue(s=engine_name.encode()),
                        "_specified_kernel_lib_name": attr_value_pb2.AttrValue(s=kernel_lib_name.encode())})


def npu_optimizer_scope():
    """Tag ops with `_optimizer` (accepted, no effect in simulation)."""
    return _attr_scope({"_optimizer": attr_value_pb2.AttrValue(b=True)})


def npu_recompute_scope():
    """The `NpuRecompute` name scope (accepted, no effect in simulation)."""
    return tf.name_scope("NpuRecompute")
