"""HCCL groups and rank queries (hccl.manage.api): the world group, create_group and the rank helpers.

The world group `hccl_world_group` holds every rank. create_group(name, rank_num, rank_ids) makes
a sub-group; every rank of the group calls it with the same arguments (as on the NPU). A rank's
number inside a group is its position among the group's world ranks in ascending order. Each group
is a TensorFlow collective group: the world group has key 1, a named group a key derived from its
name, and a point-to-point pair (send/receive) a key derived from its two ranks, so every process
computes the same keys without talking to the others.
"""

import zlib

from npu_sim_bridge.runtime.hccl import cluster

WORLD_GROUP = "hccl_world_group"
WORLD_GROUP_KEY = 1
_NAMED_KEY_BASE = 1 << 20
_PAIR_KEY_BASE = 1 << 29

_groups = {}  # name -> tuple of world ranks (ascending)
_keys = {}  # group key -> name, to refuse two names hashing to one key


def world_size():
    return cluster.info().rank_size


def world_rank():
    return cluster.info().rank_id


def members(group=WORLD_GROUP):
    """The world ranks of a group, ascending."""
    if group == WORLD_GROUP:
        return tuple(range(world_size()))
    if group not in _groups:
        raise ValueError(f"HCCL group {group!r} does not exist; create it with create_group first "
                         f"(the world group is {WORLD_GROUP!r})")
    return _groups[group]


def group_key(group=WORLD_GROUP):
    members(group)
    return WORLD_GROUP_KEY if group == WORLD_GROUP else _named_key(group)


def pair_key(rank_a, rank_b):
    """The group key of the two-rank group send/receive use between world ranks a and b."""
    low, high = sorted((rank_a, rank_b))
    return _PAIR_KEY_BASE + low * world_size() + high


def check_member(group=WORLD_GROUP):
    """This rank's group rank; ValueError naming the group when this rank is not in it."""
    ranks = members(group)
    if world_rank() not in ranks:
        raise ValueError(f"rank {world_rank()} is not in HCCL group {group!r} (ranks {list(ranks)}); only its "
                         "members can run its collectives")
    return ranks.index(world_rank())


def check_group_rank(group, group_rank, what="rank"):
    ranks = members(group)
    if isinstance(group_rank, bool) or not isinstance(group_rank, int) or not 0 <= group_rank < len(ranks):
        raise ValueError(f"{what} {group_rank!r} does not exist in HCCL group {group!r}, whose ranks are "
                         f"0..{len(ranks) - 1}")
    return group_rank


def create_group(group, rank_num, rank_ids):
    """Create an HCCL group of the world ranks rank_ids (rank_num of them)."""
    if not isinstance(group, str) or not group or group == WORLD_GROUP:
        raise ValueError(f"HCCL group name {group!r} is invalid: give a non-empty name other than {WORLD_GROUP!r}")
    ranks = list(rank_ids)
    size = world_size()
    if len(ranks) != rank_num:
        raise ValueError(f"HCCL group {group!r}: rank_num is {rank_num} but rank_ids has {len(ranks)} ranks {ranks}")
    if not ranks or len(set(ranks)) != len(ranks) or not all(isinstance(rank, int) and 0 <= rank < size
                                                             for rank in ranks):
        raise ValueError(f"HCCL group {group!r} with ranks {ranks}: rank_ids must be distinct world ranks "
                         f"0..{size - 1} (RANK_SIZE is {size})")
    if group in _groups:
        raise ValueError(f"HCCL group {group!r} already exists; destroy_group it first")
    key = _named_key(group)
    if key in _keys:
        raise ValueError(f"HCCL group names {group!r} and {_keys[key]!r} map onto one collective group key; "
                         "rename one of them")
    _groups[group] = tuple(sorted(ranks))
    _keys[key] = group


def _named_key(group):
    return _NAMED_KEY_BASE + zlib.crc32(group.encode("utf-8")) % (_PAIR_KEY_BASE - _NAMED_KEY_BASE)


def destroy_group(group):
    """Destroy a group create_group made."""
    if group not in _groups:
        raise ValueError(f"HCCL group {group!r} does not exist")
    del _keys[_named_key(group)]
    del _groups[group]


def get_rank_size(group=WORLD_GROUP):
    """Ranks in the group."""
    return len(members(group))


def get_rank_id(group=WORLD_GROUP):
    """This process's rank in the group."""
    return check_member(group)


def get_local_rank_size(group=WORLD_GROUP):
    """Ranks of the group on this rank's server."""
    local = set(cluster.info().local_ranks)
    return sum(1 for rank in members(group) if rank in local)


def get_local_rank_id(group=WORLD_GROUP):
    """This process's rank among the group's ranks on its server."""
    check_member(group)
    local = set(cluster.info().local_ranks)
    return [rank for rank in members(group) if rank in local].index(world_rank())


def get_world_rank_from_group_rank(group, group_rank_id):
    """The world rank of a rank of the group."""
    return members(group)[check_group_rank(group, group_rank_id, "group rank")]


def get_group_rank_from_world_rank(world_rank_id, group):
    """The rank in the group of a world rank."""
    ranks = members(group)
    if world_rank_id not in ranks:
        raise ValueError(f"world rank {world_rank_id!r} is not in HCCL group {group!r} (ranks {list(ranks)})")
    return ranks.index(world_rank_id)


def set_split_strategy_by_idx(idx_list, group=WORLD_GROUP):
    """Gradient split strategy for all-reduce fusion: checked, no effect (each gradient is its own all-reduce)."""
    members(group)
    if not isinstance(idx_list, (list, tuple)) or not all(isinstance(index, int) for index in idx_list):
        raise ValueError(f"set_split_strategy_by_idx expects a list of gradient indexes, got {idx_list!r}")


def set_split_strategy_by_size(data_size_list, group=WORLD_GROUP):
    """Gradient split strategy for all-reduce fusion: checked, no effect (each gradient is its own all-reduce)."""
    members(group)
    if not isinstance(data_size_list, (list, tuple)) or sum(data_size_list) != 100:
        raise ValueError(f"set_split_strategy_by_size expects percentages adding up to 100, got {data_size_list!r}")
