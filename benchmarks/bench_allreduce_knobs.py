"""Where a 2-rank allreduce's time goes: TensorFlow collective-runtime settings, measured interleaved.

    python benchmarks/bench_allreduce_knobs.py [--rounds 3] [--steps 3] [--sizes 1,16,64] [--settings "A;B"]

Two processes (ranks) each start one tf.distribute.Server per setting below, on localhost, so
every setting runs on its own pair of servers in the same two processes; each round runs every
setting's allreduce in turn (interleaved), and the table gives the best round's median. Settings:

  default          ConfigProto as the simulator built it before (group leader, isolate_session_state)
  chunk 4 MiB / -1 experimental.recv_buf_max_chunk: bytes per string in a RecvBuf response
                   (0, TensorFlow's default, means 4096 bytes); -1 one string per tensor
  +subdivs 1 / 8   the op's max_subdivs_per_device (ring subdivisions, default -1: TensorFlow's 2)
  +rpc_options     use_rpc_for_inprocess_master, cache_rpc_response, num_channels_per_target 2
  4 instances      the tensor split in 4, each part its own CollectiveReduceV2 (instance), run at once
  send/recv        the floor: a plain cross-task copy (rank 1 fetches a tensor of rank 0 through
                   _Send/_Recv, TensorFlow's RecvTensor RPC), the same bytes one way

Bandwidth is bytes / time (algorithm bandwidth); for 2 ranks a ring moves that much per rank.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
MARK = "KNOBS_RESULT "
JOB = "worker"

# name -> (server config fields, op attributes)
SETTINGS = {
    "default": ({}, {}),
    "subdivs 8": ({}, {"max_subdivs_per_device": 8}),
    "chunk -1, subdivs 8": ({"recv_buf_max_chunk": -1}, {"max_subdivs_per_device": 8}),
    "chunk 1 MiB, subdivs 8": ({"recv_buf_max_chunk": MIB}, {"max_subdivs_per_device": 8}),
    "subdivs 16 (the product)": ({}, {"max_subdivs_per_device": 16}),
    "chunk -1, subdivs 16": ({"recv_buf_max_chunk": -1}, {"max_subdivs_per_device": 16}),
    "chunk 1 MiB, subdivs 16": ({"recv_buf_max_chunk": MIB}, {"max_subdivs_per_device": 16}),
    "chunk 4 MiB, subdivs 16": ({"recv_buf_max_chunk": 4 * MIB}, {"max_subdivs_per_device": 16}),
    "4 instances, chunk -1": ({"recv_buf_max_chunk": -1}, {"max_subdivs_per_device": 4, "split": 4}),
}
FLOOR = "send/recv (floor)"


def _config(fields, rank):
    from tensorflow.core.protobuf import config_pb2

    config = config_pb2.ConfigProto()
    config.experimental.collective_group_leader = f"/job:{JOB}/replica:0/task:0"
    config.isolate_session_state = True
    config.device_filters.append(f"/job:{JOB}/replica:0/task:{rank}")
    if "recv_buf_max_chunk" in fields:
        config.experimental.recv_buf_max_chunk = fields["recv_buf_max_chunk"]
    if fields.get("rpc"):
        config.rpc_options.use_rpc_for_inprocess_master = True
        config.rpc_options.cache_rpc_response = True
        config.rpc_options.num_channels_per_target = 2
    return config


def _worker(rank, ports, sizes, rounds, steps, names):
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    runs = {}
    for index, name in enumerate(names):
        fields, attrs = SETTINGS.get(name, ({"recv_buf_max_chunk": -1}, {}))
        cluster = tf.train.ClusterSpec({JOB: [f"localhost:{ports[index][r]}" for r in range(2)]})
        server = tf.distribute.Server(cluster, job_name=JOB, task_index=rank, config=_config(fields, rank), start=True)
        graph = tf.Graph()
        fetches = {}
        with graph.as_default():
            for key, size in enumerate(sizes, start=1):
                if name == FLOOR:
                    with tf.device(f"/job:{JOB}/replica:0/task:0"):
                        source = tf.Variable(tf.ones([size * MIB // 4]), name=f"source{size}")
                    with tf.device(f"/job:{JOB}/replica:0/task:1"):
                        fetches[size] = tf.reduce_sum(tf.identity(source)[:1])
                    continue
                value = tf.Variable(tf.ones([size * MIB // 4]))
                op_attrs = {k: v for k, v in attrs.items() if k != "split"}
                parts = tf.split(value, attrs.get("split", 1))
                reduced = [tf.raw_ops.CollectiveReduceV2(
                    input=part, group_size=2, group_key=1, instance_key=key * 100 + i, ordering_token=[],
                    merge_op="Add", final_op="Id", **op_attrs) for i, part in enumerate(parts)]
                fetches[size] = tf.add_n([tf.reduce_sum(r[:1]) for r in reduced])
            init = tf.compat.v1.global_variables_initializer()
        config = _config(fields, rank)
        if name == FLOOR:
            del config.device_filters[:]
        sess = tf.compat.v1.Session(server.target, graph=graph, config=config)
        if name != FLOOR or rank == 1:
            sess.run(init)
        runs[name] = (server, sess, fetches)
    _barrier(rank, ports[-1][0])
    best = {name: {size: float("inf") for size in sizes} for name in names}
    best_cpu = {name: {size: 0.0 for size in sizes} for name in names}
    for _ in range(rounds):
        for name in names:
            _server, sess, fetches = runs[name]
            for size in sizes:
                if name == FLOOR and rank == 0:
                    continue  # rank 1 pulls; rank 0's server answers
                for _ in range(2):
                    sess.run(fetches[size])  # warm-up
                times, cpu = [], []
                for _ in range(steps):
                    started, cpu_started = time.perf_counter(), time.process_time()
                    sess.run(fetches[size])
                    times.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - cpu_started)
                if statistics.median(times) < best[name][size]:
                    best[name][size] = statistics.median(times)
                    best_cpu[name][size] = statistics.median(cpu)
    print(MARK + json.dumps({"rank": rank, "best": best, "cpu": best_cpu}), flush=True)
    _barrier(rank, ports[-1][0])  # rank 0 keeps its servers up until rank 1 is done


def _barrier(rank, port):
    """Both ranks meet: rank 0 listens on `port`, rank 1 connects and both wait for a byte."""
    if rank == 0:
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("localhost", port))
            listener.listen(1)
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"x")
                conn.recv(1)
        return
    deadline = time.monotonic() + 600
    while True:
        try:
            with socket.create_connection(("localhost", port), timeout=600) as conn:
                conn.recv(1)
                conn.sendall(b"x")
            return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def measure(sizes, rounds, steps, extra_env=(), names=None):
    """({setting: {size MiB: best seconds}}, {setting: {size MiB: CPU seconds}}) for rank 1 (the slower of
    the two sees the whole exchange); `names`: only these settings (of SETTINGS and FLOOR), default all."""
    names = list(SETTINGS) + [FLOOR] if names is None else list(names)
    unknown = [name for name in names if name not in SETTINGS and name != FLOOR]
    if unknown:
        raise ValueError(f"unknown allreduce setting(s) {unknown}: choose from {list(SETTINGS) + [FLOOR]}")
    count = len(names)
    flat = _free_ports(2 * count + 1)
    ports = [flat[2 * i:2 * i + 2] for i in range(count)] + [[flat[-1]]]
    args = [json.dumps(ports), ",".join(map(str, sizes)), str(rounds), str(steps), json.dumps(names)]
    procs = [subprocess.Popen([sys.executable, __file__, "--role", str(rank), *args], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **dict(extra_env)})
             for rank in range(2)]
    outputs = [proc.communicate(timeout=1200)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        sys.exit(f"bench_allreduce_knobs: a rank failed (exit {[proc.returncode for proc in procs]})")
    results = [json.loads(line.split(MARK, 1)[1]) for out in outputs for line in out.splitlines() if MARK in line]
    rank1 = next(result for result in results if result["rank"] == 1)
    return tuple({name: {int(size): seconds for size, seconds in by_size.items()} for name, by_size in rank1[key].items()}
                 for key in ("best", "cpu"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sizes", default="1,16,64")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for both rank processes (repeatable)")
    parser.add_argument("--settings", help="only these settings, separated by ';' (default: every setting and "
                        "the floor)")
    parser.add_argument("--role", type=int, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:
        ports, sizes, rounds, steps, names = args.rest
        _worker(args.role, json.loads(ports), [int(s) for s in sizes.split(",")], int(rounds), int(steps),
                json.loads(names))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    names = args.settings.split(";") if args.settings else None
    best, cpu = measure(sizes, args.rounds, args.steps, [item.split("=", 1) for item in args.env], names)
    print("allreduce (sum, float32), 2 ranks on localhost: algorithm bandwidth MB/s, best of "
          f"{args.rounds} interleaved rounds (median of {args.steps} runs each)")
    print("and rank 1's process CPU time per run (ms, all its threads) in that round")
    print(f"{'setting':<26}" + "".join(f"{f'{size} MiB':>10}" for size in sizes) + "".join(
        f"{f'cpu {size}':>10}" for size in sizes))
    for name, by_size in best.items():
        print(f"{name:<26}" + "".join(f"{size * MIB / by_size[size] / 1e6:>10.0f}" for size in sizes) + "".join(
            f"{cpu[name][size] * 1e3:>10.1f}" for size in sizes))


if __name__ == "__main__":
    main()
