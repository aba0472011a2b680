"""hccl_ops collectives as TensorFlow collective ops (CollectiveReduceV2, CollectiveGatherV2, CollectiveBcast*V2).

Each HCCL call builds TensorFlow collective ops over the group's collective group (groups.py);
they run between the ranks' gRPC servers (cluster.py) when the Session runs them. Every op built
gets the next instance key of its group in this process (TensorFlow's servers remember an
instance key's shape for their lifetime, so keys are never reused, not even by a new graph), so
the ranks, which build the same collectives in the same order, agree on the keys without
talking: like the NPU, a rank must not build collectives the others do not build. What the adapter's
ops do that TensorFlow's do not is built around them:
- allgather concatenates in group-rank order (TensorFlow's gather order is its own device order,
  so the group ranks are gathered too and the chunks put in order);
- reduce_scatter is an all-reduce of which each rank keeps its slice of the first dimension;
- reduce gives every rank the result, the root included;
- send/receive are a broadcast inside the two-rank group of sender and receiver; the k-th send
  with a tag from rank a to rank b meets the k-th receive with that tag at b from a;
- int8/int16/uint8 are reduced as int32 (TensorFlow's collectives lack them).
In a group of one rank every collective is an Identity op (the input), as before multi-rank
support. Each op times out (DeadlineExceededError) after HCCL_EXEC_TIMEOUT seconds, default 1836 as
HCCL's, waiting for the other ranks included; 0 waits for ever.
"""

import itertools
import os
import threading

import tensorflow as tf
from tensorflow.python.framework import ops, tensor_util

from npu_sim_bridge.runtime.hccl import cluster, groups, ranktable
from npu_sim_bridge.runtime.hccl.groups import WORLD_GROUP

REDUCTIONS = {"sum": "Add", "prod": "Mul", "max": "Max", "min": "Min"}
_WIDENED = (tf.int8, tf.int16, tf.uint8, tf.uint16)
_SUPPORTED = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)
_GRADIENT = "NpuSimHcclAllReduce"
EXEC_TIMEOUT_ENV = "HCCL_EXEC_TIMEOUT"
DEFAULT_EXEC_TIMEOUT = 1836.0  # seconds, HCCL's default
# The ring all-reduce cuts each rank's share of a tensor into up to this many pieces of at most 4 MiB
# (TensorFlow's default, -1, means 2): a 64 MiB all-reduce across 2 ranks then moves 4 MiB pieces, not
# 16 MiB ones, at 2-3x the bandwidth and a third less CPU (benchmarks/bench_allreduce_knobs.py).
# Read when an op is built; tensors of 16 MiB or less across 2 ranks are cut as before.
MAX_SUBDIVS_PER_DEVICE = 16

_instance_keys = {}  # counter name (a group key, or a send/receive channel) -> itertools.count
_instance_lock = threading.Lock()


def _next_instance_key(counter):
    """The next instance key of `counter` in this process."""
    with _instance_lock:
        return next(_instance_keys.setdefault(counter, itertools.count(1)))


def _timeout():
    text = os.environ.get(EXEC_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_EXEC_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ranktable.RankConfigError(
            f"environment variable {EXEC_TIMEOUT_ENV}={text!r} must be a number of seconds >= 0 (HCCL's default: "
            f"{DEFAULT_EXEC_TIMEOUT:g})")
    return value


def check_reduction(reduction, allowed=tuple(REDUCTIONS)):
    if reduction not in allowed:
        raise ValueError(f"reduction {reduction!r} is invalid, it should be one of: {', '.join(allowed)}")


def _identity(tensor, name):
    if isinstance(tensor, (list, tuple)):
        return [tf.identity(item, name=name) for item in tensor]
    return tf.identity(tensor, name=name)


def _collective_context(group):
    """Checks before building a collective across processes: graph mode, membership; routes Sessions."""
    if tf.executing_eagerly():
        raise RuntimeError("hccl_ops across ranks need TF1 graph mode (a Session runs them); call "
                           "tf.compat.v1.disable_eager_execution() or import npu_bridge.npu_init first")
    cluster.route_sessions()
    return groups.check_member(group)


def _widened(tensor, op_name):
    dtype = tensor.dtype.base_dtype
    if dtype in _SUPPORTED:
        return tensor, None
    if dtype in _WIDENED:
        return tf.cast(tensor, tf.int32), dtype
    raise TypeError(f"{op_name} of a {dtype.name} tensor ({tensor.name}) is not supported; HCCL takes "
                    "int8, int16, int32, int64, float16, bfloat16, float32 and float64")


def _reduce(tensor, merge_op, group_size, group_key, name):
    graph = tf.compat.v1.get_default_graph()
    with graph.gradient_override_map({"CollectiveReduceV2": _GRADIENT}):
        return tf.raw_ops.CollectiveReduceV2(
            input=tensor, group_size=group_size, group_key=group_key,
            instance_key=_next_instance_key(group_key), ordering_token=[], merge_op=merge_op,
            final_op="Id", timeout_seconds=_timeout(), max_subdivs_per_device=MAX_SUBDIVS_PER_DEVICE, name=name)


@ops.RegisterGradient(_GRADIENT)
def _allreduce_gradient(op, grad):
    """The gradient of an all-reduce is the sum all-reduce of the gradients (as the adapter registers it)."""
    group_size = int(tensor_util.constant_value(op.inputs[1]))
    group_key = int(tensor_util.constant_value(op.inputs[2]))
    summed = _reduce(grad, "Add", group_size, group_key, "HcomAllReduceGrad")
    return [summed, None, None, None] + [None] * (len(op.inputs) - 4)


def allreduce(tensor, reduction, fusion=1, fusion_id=-1, group=WORLD_GROUP):
    """All-reduce over the group: every rank gets the reduction (sum, prod, max, min) of all ranks' tensors."""
    check_reduction(reduction)
    size = groups.get_rank_size(group)
    if size == 1:
        return _identity(tensor, "HcomAllReduce")
    _collective_context(group)
    if isinstance(tensor, (list, tuple)):
        return [allreduce(item, reduction, fusion, fusion_id, group) for item in tensor]
    tensor = tf.convert_to_tensor(tensor)
    with tf.name_scope("HcomAllReduce"):
        value, original = _widened(tensor, "allreduce")
        reduced = _reduce(value, REDUCTIONS[reduction], size, groups.group_key(group), "CollectiveReduce")
        reduced.set_shape(tensor.shape)
        return tf.cast(reduced, original) if original is not None else reduced


def allgather(tensor, rank_size, group=WORLD_GROUP, fusion=0, fusion_id=-1):
    """All-gather: the ranks' tensors concatenated along the first dimension in group-rank order."""
    size = groups.get_rank_size(group)
    if rank_size != size:
        raise ValueError(f"allgather rank_size {rank_size} does not match HCCL group {group!r}, which has {size} "
                         "ranks; pass get_rank_size(group)")
    if size == 1:
        return _identity(tensor, "HcomAllGather")
    my_rank = _collective_context(group)
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError(f"allgather of the scalar {tensor.name}: HCCL gathers along the first dimension; "
                         "reshape it to [1] first")
    key = groups.group_key(group)
    with tf.name_scope("HcomAllGather"):
        value, original = _widened(tensor, "allgather")
        gathered = tf.raw_ops.CollectiveGatherV2(
            input=value, group_size=size, group_key=key, instance_key=_next_instance_key(key),
            ordering_token=[], timeout_seconds=_timeout())
        order = tf.raw_ops.CollectiveGatherV2(
            input=tf.constant([my_rank], tf.int32), group_size=size, group_key=key,
            instance_key=_next_instance_key(key), ordering_token=[], timeout_seconds=_timeout())
        rest = tf.shape(value)[1:]
        chunks = tf.reshape(gathered, tf.concat([[size, -1], rest], 0))
        ordered = tf.reshape(tf.gather(chunks, tf.argsort(order)), tf.concat([[-1], rest], 0))
        first = tensor.shape[0] * size if tensor.shape[0] is not None else None
        ordered.set_shape(tf.TensorShape([first]).concatenate(tensor.shape[1:]))
        return tf.cast(ordered, original) if original is not None else ordered


def broadcast(tensor, root_rank, fusion=2, fusion_id=0, group=WORLD_GROUP):
    """Broadcast a list of tensors from root_rank (a group rank); returns the list every rank receives."""
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    groups.check_group_rank(group, root_rank, "root_rank")
    size = groups.get_rank_size(group)
    if size == 1:
        return _identity(tensors, "HcomBroadcast")
    my_rank = _collective_context(group)
    key = groups.group_key(group)
    results = []
    for item in tensors:
        instance_key = _next_instance_key(key)
        with tf.name_scope("HcomBroadcast"):
            if my_rank == root_rank:
                results.append(_bcast_send(item, size, key, instance_key))
            else:
                dtype, shape = _dtype_and_shape(item)
                results.append(_bcast_recv(dtype, shape, size, key, instance_key))
    return results


def _bcast_send(tensor, size, key, instance_key):
    value, original = _widened(tf.convert_to_tensor(tensor), "broadcast")
    out = tf.raw_ops.CollectiveBcastSendV2(input=value, group_size=size, group_key=key,
                                           instance_key=instance_key, timeout_seconds=_timeout())
    return tf.cast(out, original) if original is not None else out


def _bcast_recv(dtype, shape, size, key, instance_key):
    wide = tf.int32 if dtype in _WIDENED else dtype
    if wide not in _SUPPORTED:
        raise TypeError(f"broadcast of a {dtype.name} tensor is not supported; HCCL takes int8, int16, int32, "
                        "int64, float16, bfloat16, float32 and float64")
    out = tf.raw_ops.CollectiveBcastRecvV2(group_size=size, group_key=key, instance_key=instance_key,
                                           shape=shape, T=wide, timeout_seconds=_timeout())
    if not tf.is_tensor(shape):
        out.set_shape(shape)
    return tf.cast(out, dtype) if wide != dtype else out


def _dtype_and_shape(tensor):
    """dtype and shape a receiver allocates, without reading a variable when its shape is static."""
    if tensor.shape.is_fully_defined():
        return tensor.dtype.base_dtype, tensor.shape.as_list()
    tensor = tf.convert_to_tensor(tensor)
    return tensor.dtype.base_dtype, tf.shape(tensor)


def reduce(tensor, reduction, root_rank, fusion=0, fusion_id=-1, group=WORLD_GROUP):
    """Reduce to root_rank; every rank (the root included) gets the reduction."""
    groups.check_group_rank(group, root_rank, "root_rank")
    return allreduce(tensor, reduction, group=group)


def reduce_scatter(tensor, reduction, rank_size, group=WORLD_GROUP, fusion=0, fusion_id=-1):
    """Reduce-scatter: the reduction, of which group rank i keeps the i-th of rank_size slices of dimension 0."""
    check_reduction(reduction)
    size = groups.get_rank_size(group)
    if rank_size != size:
        raise ValueError(f"reduce_scatter rank_size {rank_size} does not match HCCL group {group!r}, which has "
                         f"{size} ranks; pass get_rank_size(group)")
    if size == 1:
        return allreduce(tensor, reduction, group=group)
    my_rank = _collective_context(group)
    tensor = tf.convert_to_tensor(tensor)
    first = tensor.shape[0] if tensor.shape.rank else None
    if tensor.shape.rank == 0 or (first is not None and first % size):
        raise ValueError(f"reduce_scatter of {tensor.name} with shape {tensor.shape}: its first dimension must "
                         f"divide into rank_size {size} equal slices")
    reduced = allreduce(tensor, reduction, group=group)
    with tf.name_scope("HcomReduceScatter"):
        chunk = tf.shape(reduced)[0] // size
        sliced = reduced[my_rank * chunk:(my_rank + 1) * chunk]
        sliced.set_shape(tf.TensorShape([first // size if first is not None else None]).concatenate(
            tensor.shape[1:]))
        return sliced


def _peer(group, group_rank, what):
    groups.check_group_rank(group, group_rank, what)
    peer = groups.members(group)[group_rank]
    me = groups.world_rank()
    if peer == me:
        raise ValueError(f"{what} {group_rank} is this rank itself (world rank {me}); send and receive need "
                         "another rank")
    return me, peer


def _check_tag(sr_tag):
    if isinstance(sr_tag, bool) or not isinstance(sr_tag, int) or sr_tag < 0:
        raise ValueError(f"sr_tag must be a non-negative int, got {sr_tag!r}")


def _p2p_instance_key(sender, receiver, sr_tag):
    """The instance key of the next transfer with sr_tag from sender to receiver (world ranks) in this process."""
    count = _next_instance_key(("p2p", sender, receiver, sr_tag))
    if count >= 1 << 16:
        raise ValueError(f"more than 65535 sends with sr_tag {sr_tag} from rank {sender} to rank {receiver}; "
                         "use other tags")
    direction = 0 if sender < receiver else 1
    return (((sr_tag * 2 + direction) % (1 << 14)) << 16) + count


def send(tensor, sr_tag, dest_rank, group=WORLD_GROUP):
    """Send a tensor to dest_rank (a group rank), which receives it with receive(..., sr_tag, src_rank=this rank).

    Returns the send Operation (run it on the sender while the receiver runs its receive).
    """
    _check_tag(sr_tag)
    me, peer = _peer(group, dest_rank, "dest_rank")
    _collective_context(group)
    with tf.name_scope("HcomSend"):
        out = _bcast_send(tensor, 2, groups.pair_key(me, peer), _p2p_instance_key(me, peer, sr_tag))
    return out.op


def receive(shape, data_type, sr_tag, src_rank, group=WORLD_GROUP):
    """Receive the tensor (of that shape and dtype) that src_rank (a group rank) sends with the same sr_tag."""
    _check_tag(sr_tag)
    me, peer = _peer(group, src_rank, "src_rank")
    _collective_context(group)
    if not tf.is_tensor(shape):
        shape = tf.TensorShape(shape)
        if not shape.is_fully_defined():
            raise ValueError(f"receive shape {shape} must be fully defined (or a shape tensor)")
        shape = shape.as_list()
    with tf.name_scope("HcomReceive"):
        return _bcast_recv(tf.as_dtype(data_type), shape, 2, groups.pair_key(me, peer),
                           _p2p_instance_key(peer, me, sr_tag))
