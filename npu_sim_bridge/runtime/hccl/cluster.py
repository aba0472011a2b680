"""This rank's TensorFlow gRPC server, and the Sessions routed through it when RANK_SIZE > 1.

Collectives between processes run on TensorFlow's own distributed runtime: each rank starts a
`tf.distribute.Server` of job `worker`, task = its rank, in a ClusterSpec built from the rank
table (ranktable.py), with rank 0 as `collective_group_leader` (it resolves groups and hands
out step ids). Sessions then run on that server as a master session: target `grpc://...`, the
config's `device_filters` limited to this task (so every op and variable stays in this process),
`isolate_session_state` on (variables belong to one Session, as with a local Session) and the
same group leader.

Once `route_sessions()` has been called in a process with RANK_SIZE > 1 (importing npu_init or an
npu_bridge/hccl module through the alias does it, and so do npu_config_proto and building an hccl
op), every Session created with an empty target (tf.Session, MonitoredTrainingSession / Estimator,
Keras) gets that target and config, whatever the config it was given: a hook of
session_hooks.py, after the opt-in NpuOptimizer hook of session.py, so both can be on. The
server is started by the first such Session, which then waits (HCCL_CONNECT_TIMEOUT seconds,
default 120) until every other rank's server accepts connections; under `npu-sim launch` a rank that
ended meanwhile ends the wait at once, and a rank that ended (launched or started by hand) ends a
collective that waits for it within seconds (peer_exits.py). With RANK_SIZE 1 nothing here
runs. A rank's collectives finish only once their data has been taken by the peers, so a rank that
is done may exit without a closing barrier.
"""

import os
import threading
import time

from tensorflow.core.protobuf import config_pb2

from npu_sim_bridge import session_hooks
from npu_sim_bridge.runtime.hccl import peer_exits, ranktable

JOB = "worker"
CONNECT_TIMEOUT_ENV = "HCCL_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 120.0

_lock = threading.RLock()
_server = None
_info = None


def info():
    """This process's RankInfo, read from the environment once."""
    global _info
    with _lock:
        if _info is None:
            _info = ranktable.rank_info()
        return _info


def reset_for_tests(environ=None):
    """Forget the cached RankInfo (unit tests change the environment); the server, once started, stays."""
    global _info
    with _lock:
        _info = ranktable.rank_info(environ) if environ is not None else None


def task_name(rank):
    return f"/job:{JOB}/replica:0/task:{rank}"


def _server_config(rank_info):
    config = config_pb2.ConfigProto()
    config.experimental.collective_group_leader = task_name(0)
    config.isolate_session_state = True
    config.device_filters.append(task_name(rank_info.rank_id))
    return config


def server():
    """This rank's started tf.distribute.Server (started, and peers awaited, on first call)."""
    global _server
    with _lock:
        if _server is not None:
            return _server
        import tensorflow as tf

        rank_info = info()
        cluster = tf.train.ClusterSpec({JOB: [rank_info.address(rank) for rank in range(rank_info.rank_size)]})
        try:
            started = tf.distribute.Server(cluster, job_name=JOB, task_index=rank_info.rank_id,
                                           config=_server_config(rank_info), start=True)
        except tf.errors.OpError as error:
            raise ranktable.RankConfigError(
                f"rank {rank_info.rank_id} cannot start its TensorFlow server at {rank_info.address(rank_info.rank_id)}"
                f" ({error.message.splitlines()[0]}); the port is probably taken: choose another base with "
                f"{ranktable.PORT_BASE_ENV} (npu-sim launch picks free ports itself)") from None
        _server = started
    peer_exits.watch(rank_info)  # stop when waiting for a rank that ended (told by npu-sim launch, or seen)
    wait_for_peers(rank_info)
    return _server


def connect_timeout(environ=None):
    environ = os.environ if environ is None else environ
    text = environ.get(CONNECT_TIMEOUT_ENV, "")
    if not text.strip():
        return DEFAULT_CONNECT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ranktable.RankConfigError(f"environment variable {CONNECT_TIMEOUT_ENV}={text!r} is not a number of "
                                        "seconds") from None
    if value <= 0:
        raise ranktable.RankConfigError(f"environment variable {CONNECT_TIMEOUT_ENV}={text!r} must be positive")
    return value


def wait_for_peers(rank_info, timeout=None):
    """Return once every other rank's server accepts TCP connections; raise naming the missing ranks at timeout."""
    timeout = connect_timeout() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    waiting = [rank for rank in range(rank_info.rank_size) if rank != rank_info.rank_id]
    while waiting:
        waiting = [rank for rank in waiting if not peer_exits.accepts(rank_info, rank)]
        if not waiting:
            return
        peer_exits.check_connect(rank_info.rank_id, waiting)
        if time.monotonic() > deadline:
            missing = ", ".join(f"rank {rank} at {rank_info.address(rank)}" for rank in waiting)
            raise ranktable.RankConfigError(
                f"rank {rank_info.rank_id} waited {timeout:g} s ({CONNECT_TIMEOUT_ENV}) for {missing}, which never "
                "came up; start every rank with the same RANK_SIZE, RANK_TABLE_FILE and "
                f"{ranktable.PORT_BASE_ENV}, or use `npu-sim launch`")
        time.sleep(0.1)


def session_arguments(target, config):
    """(target, config) for a new Session: this rank's server and a copy of config with the cluster settings."""
    if target or not info().distributed:
        return target, config
    routed = config_pb2.ConfigProto()
    if config is not None:
        routed.CopyFrom(config)
    rank_info = info()
    routed.experimental.collective_group_leader = task_name(0)
    routed.isolate_session_state = True
    del routed.device_filters[:]
    routed.device_filters.append(task_name(rank_info.rank_id))
    return server().target, routed


def route_sessions():
    """With RANK_SIZE > 1, make every new Session with an empty target run on this rank's server. Idempotent."""
    if info().distributed:
        session_hooks.add("routing", session_hooks.ROUTING,
                          lambda session, target, config: session_arguments(target, config))


def sessions_routed():
    """True once route_sessions() has taken effect."""
    return session_hooks.active("routing")
