"""tf.contrib.all_reduce: all-reduce of one tensor per device, built into the TF1 graph.

Each builder takes N tensors of one shape, one per device (tensor.device), and returns N tensors,
output i on the device of input i, each equal to un_op(the reduction of all N inputs). TensorFlow
1.15's builders differ in how the data moves between devices (ring, recursive halving-doubling,
shuffle through gather devices, NCCL, and two-level combinations). On the simulator's devices
(CPU/GPU) they give the same values, computed here with the reduction order the algorithm's name
suggests: a chain for the ring, a pairwise tree for halving-doubling, n-ary on gather devices for
the shuffle. Floating-point sums may differ in the last bits from TensorFlow 1.15's chunked order.
"""

import tensorflow as tf


def _check(input_tensors, what):
    tensors = list(input_tensors)
    if not tensors:
        raise ValueError(f"{what}: input_tensors is empty; pass one tensor per device")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if not t.shape.is_compatible_with(shape):
            raise ValueError(f"{what}: all input tensors must have one shape; {tensors[0].name} is {shape} but "
                             f"{t.name} is {t.shape}")
        if t.dtype != tensors[0].dtype:
            raise ValueError(f"{what}: all input tensors must have one dtype; {tensors[0].name} is "
                             f"{tensors[0].dtype.name} but {t.name} is {t.dtype.name}")
    return tensors


def _chain(tensors, red_op):
    total = tensors[0]
    for t in tensors[1:]:
        with tf.device(t.device):
            total = red_op(total, t)
    return total


def _tree(tensors, red_op):
    level = list(tensors)
    while len(level) > 1:
        paired = []
        for index in range(0, len(level) - 1, 2):
            with tf.device(level[index].device):
                paired.append(red_op(level[index], level[index + 1]))
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _first(devices, what):
    if not devices:
        raise ValueError(f"{what}: the list of gather devices is empty; name at least one device")
    return devices[0]


def _n_ary(tensors, red_n_op, device):
    with tf.device(device):
        return red_n_op(list(tensors))


def _spread(total, tensors, un_op):
    outputs = []
    for t in tensors:
        with tf.device(t.device):
            value = tf.identity(total)
            outputs.append(un_op(value) if un_op is not None else value)
    return outputs


def build_ring_all_reduce(input_tensors, num_workers, num_subchunks, gpu_perm, red_op, un_op=None):
    """All-reduce along a ring of the devices (binary red_op, e.g. tf.add); num_workers, num_subchunks and
    gpu_perm describe the ring's schedule and do not change the values."""
    tensors = _check(input_tensors, "build_ring_all_reduce")
    if num_workers < 1 or len(tensors) % num_workers:
        raise ValueError(f"build_ring_all_reduce: {len(tensors)} input tensors do not split into num_workers="
                         f"{num_workers} workers")
    if num_subchunks < 1:
        raise ValueError(f"build_ring_all_reduce: num_subchunks must be >= 1, got {num_subchunks}")
    if sorted(gpu_perm) != list(range(len(tensors) // num_workers)):
        raise ValueError(f"build_ring_all_reduce: gpu_perm {list(gpu_perm)} must be a permutation of the "
                         f"{len(tensors) // num_workers} devices of a worker")
    order = [tensors[w * len(gpu_perm) + d] for w in range(num_workers) for d in gpu_perm]
    return _spread(_chain(order, red_op), tensors, un_op)


def build_recursive_hd_all_reduce(input_tensors, red_op, un_op=None):
    """All-reduce by recursive halving and doubling (binary red_op): reduced pairwise, as a tree."""
    tensors = _check(input_tensors, "build_recursive_hd_all_reduce")
    return _spread(_tree(tensors, red_op), tensors, un_op)


def build_shuffle_all_reduce(input_tensors, gather_devices, red_op, un_op=None):
    """All-reduce through gather devices (n-ary red_op, e.g. tf.add_n): reduced there, sent back."""
    tensors = _check(input_tensors, "build_shuffle_all_reduce")
    device = _first(gather_devices, "build_shuffle_all_reduce")
    return _spread(_n_ary(tensors, red_op, device), tensors, un_op)


def build_nccl_all_reduce(input_tensors, red_op, un_op=None):
    """All-reduce as NCCL does it (red_op must be tf.add): a sum over all devices."""
    tensors = _check(input_tensors, "build_nccl_all_reduce")
    if red_op not in (tf.add, tf.math.add):
        raise ValueError(f"build_nccl_all_reduce: red_op must be tf.add (NCCL sums), got {red_op!r}")
    return _spread(_tree(tensors, red_op), tensors, un_op)


def _by_worker(tensors):
    """Tensors grouped by the worker (job/replica/task) part of their device, in order of first appearance."""
    groups = {}
    for t in tensors:
        spec = tf.DeviceSpec.from_string(t.device or "")
        groups.setdefault((spec.job, spec.replica, spec.task), []).append(t)
    return list(groups.values())


def build_nccl_then_ring(input_tensors, subdiv, red_op, un_op=None):
    """Sum within each worker, then a ring between workers."""
    tensors = _check(input_tensors, "build_nccl_then_ring")
    del subdiv
    per_worker = [_tree(group, tf.add) for group in _by_worker(tensors)]
    return _spread(_chain(per_worker, red_op), tensors, un_op)


def build_nccl_then_recursive_hd(input_tensors, red_op, un_op=None):
    """Sum within each worker, then halving-doubling between workers."""
    tensors = _check(input_tensors, "build_nccl_then_recursive_hd")
    per_worker = [_tree(group, tf.add) for group in _by_worker(tensors)]
    return _spread(_tree(per_worker, red_op), tensors, un_op)


def build_nccl_then_shuffle(input_tensors, gather_devices, nccl_red_op, shuffle_red_op, un_op=None):
    """Sum within each worker (nccl_red_op), then an n-ary shuffle_red_op on the gather devices."""
    tensors = _check(input_tensors, "build_nccl_then_shuffle")
    device = _first(gather_devices, "build_nccl_then_shuffle")
    per_worker = [_tree(group, nccl_red_op) for group in _by_worker(tensors)]
    return _spread(_n_ary(per_worker, shuffle_red_op, device), tensors, un_op)


def build_shuffle_then_ring(input_tensors, gather_devices, subdiv, red_n_op, red_op, un_op=None):
    """An n-ary red_n_op within each worker, then a ring (binary red_op) between workers."""
    tensors = _check(input_tensors, "build_shuffle_then_ring")
    del subdiv
    per_worker = [_n_ary(group, red_n_op, group[0].device) for group in _by_worker(tensors)]
    del gather_devices
    return _spread(_chain(per_worker, red_op), tensors, un_op)


def build_shuffle_then_shuffle(input_tensors, first_gather_devices, second_gather_devices, red_op, un_op=None):
    """An n-ary red_op within each worker, then again across workers on the second gather devices."""
    tensors = _check(input_tensors, "build_shuffle_then_shuffle")
    del first_gather_devices
    device = _first(second_gather_devices, "build_shuffle_then_shuffle")
    per_worker = [_n_ary(group, red_op, group[0].device) for group in _by_worker(tensors)]
    return _spread(_n_ary(per_worker, red_op, device), tensors, un_op)


BUILDERS = ("build_ring_all_reduce", "build_recursive_hd_all_reduce", "build_shuffle_all_reduce",
            "build_nccl_all_reduce", "build_nccl_then_ring", "build_nccl_then_recursive_hd",
            "build_nccl_then_shuffle", "build_shuffle_then_ring", "build_shuffle_then_shuffle")


def all_reduce_names():
    return {name: globals()[name] for name in BUILDERS}
