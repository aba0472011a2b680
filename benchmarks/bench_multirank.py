"""Multi-rank figures: allreduce bandwidth between 2 ranks on localhost, a small model's step time at 1 and 2 ranks.

    python benchmarks/bench_multirank.py [--steps 30]

Runs `npu-sim launch --nproc 2` (and `npu-sim run` for one rank) on this script in worker roles and
prints one table. Allreduce: float32 tensors of 1, 16 and 64 MiB, sum, built twice in the same
two ranks: as hccl_ops.allreduce builds it now, and with TensorFlow's default ring subdivision
(max_subdivs_per_device -1, how it was built before); the two alternate size by size in --rounds
rounds, each figure the median of --steps runs after a warm-up, best round kept. Algorithm
bandwidth = bytes / time, bus bandwidth = 2 (n - 1) / n times that (what a ring moves per rank).
benchmarks/bench_allreduce_knobs.py measures the other settings and the send/recv floor. Step time: a 784-512-512-10 MLP with NPUDistributedOptimizer (plain SGD,
batch 128 per rank, so 2 ranks train on twice the data per step), median step of --steps after
warm-up, NpuOptimizer on, as a migrated script runs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
MIB = 1 << 20
SIZES_MIB = (1, 16, 64)
MARK = "BENCH_RESULT "


def _allreduce_ops(tf, hccl_ops, variants=("before", "after")):
    """{"<variant> <size>": scalar fetch}; "before" built with TensorFlow's default ring subdivision."""
    from npu_sim_bridge.runtime.hccl import collectives

    tuned = collectives.MAX_SUBDIVS_PER_DEVICE
    ops = {}
    for variant, subdivs in (("before", -1), ("after", tuned)):
        if variant not in variants:
            continue
        collectives.MAX_SUBDIVS_PER_DEVICE = subdivs
        for size in SIZES_MIB:
            out = hccl_ops.allreduce(tf.Variable(tf.ones([size * MIB // 4])), "sum")
            ops[f"{variant} {size}"] = tf.reduce_sum(out[:1])  # fetch a scalar, not the tensor
    collectives.MAX_SUBDIVS_PER_DEVICE = tuned
    return ops


def _measure(sess, op, steps):
    for _ in range(3):
        sess.run(op)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        sess.run(op)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _worker(role, steps, rounds):
    import numpy as np
    from npu_bridge.npu_init import (NPUDistributedOptimizer, get_rank_id, get_rank_size,  # noqa: F401
                                     npu_config_proto, tf)
    from npu_bridge.hccl import hccl_ops

    result = {"rank": get_rank_id(), "size": get_rank_size()}
    if role == "allreduce":
        ops = _allreduce_ops(tf, hccl_ops)
        with tf.Session(config=npu_config_proto()) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(rounds):
                for size in SIZES_MIB:
                    for variant in ("before", "after"):
                        name = f"{variant} {size}"
                        result[name] = min(result.get(name, float("inf")), _measure(sess, ops[name], steps))
        print(MARK + json.dumps(result), flush=True)
        return
    x = tf.constant(np.random.RandomState(0).rand(128, 784).astype(np.float32))
    y = tf.constant(np.random.RandomState(1).randint(0, 10, 128))
    hidden = tf.layers.dense(tf.layers.dense(x, 512, tf.nn.relu), 512, tf.nn.relu)
    loss = tf.losses.sparse_softmax_cross_entropy(y, tf.layers.dense(hidden, 10))
    step = NPUDistributedOptimizer(tf.train.GradientDescentOptimizer(0.01)).minimize(loss)
    with tf.Session(config=npu_config_proto()) as sess:
        sess.run(tf.global_variables_initializer())
        result["step"] = _measure(sess, step, steps)
    print(MARK + json.dumps(result), flush=True)


def _run(args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-m", "npu_sim_bridge", *args], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        sys.exit(f"bench_multirank: `npu-sim {' '.join(args)}` failed:\n{done.stderr[-3000:]}")
    results = [json.loads(line.split(MARK, 1)[1]) for line in done.stdout.splitlines() if MARK in line]
    return sorted(results, key=lambda result: result["rank"])


def _tuned_subdivs():
    from npu_sim_bridge.runtime.hccl import collectives

    return collectives.MAX_SUBDIVS_PER_DEVICE


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="allreduce: interleaved rounds, best kept")
    parser.add_argument("--ranks", default="2", help="model: rank counts to launch besides 1, e.g. 2,8")
    parser.add_argument("--role", choices=("allreduce", "model"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        _worker(args.role, args.steps, args.rounds)
        return
    steps = ["--", HERE, "--steps", str(args.steps), "--rounds", str(args.rounds), "--role"]
    allreduce = _run(["launch", "--nproc", "2", *steps, "allreduce"])
    one = _run(["run", HERE, "--steps", str(args.steps), "--role", "model"])[0]
    launched = {}
    for count in (int(text) for text in args.ranks.split(",") if text):
        started = time.perf_counter()
        launched[count] = (_run(["launch", "--nproc", str(count), *steps, "model"]), time.perf_counter() - started)
    print("hccl allreduce (sum, float32), 2 ranks on localhost, TensorFlow collective ops over gRPC")
    print(f"before: TensorFlow's default ring subdivision; after: max_subdivs_per_device "
          f"{_tuned_subdivs()} (best of {args.rounds} interleaved rounds)")
    print(f"{'size':>8} {'time before':>12} {'time after':>11} {'algbw before':>13} {'algbw after':>12} "
          f"{'busbw after':>12} {'after/before':>13}")
    print(f"{'':>8} {'(ms)':>12} {'(ms)':>11} {'(MB/s)':>13} {'(MB/s)':>12} {'(MB/s)':>12}")
    for size in SIZES_MIB:
        before, after = (max(result[f"{variant} {size}"] for result in allreduce) for variant in ("before", "after"))
        algbw_before, algbw_after = size * MIB / before / 1e6, size * MIB / after / 1e6
        print(f"{size:>5} MiB {before * 1e3:>12.1f} {after * 1e3:>11.1f} {algbw_before:>13.0f} {algbw_after:>12.0f} "
              f"{algbw_after * 2 * (2 - 1) / 2:>12.0f} {algbw_after / algbw_before:>12.2f}x")
    print("\nMLP 784-512-512-10 training step, batch 128 per rank, NPUDistributedOptimizer")
    print(f"{'ranks':>5} {'step (ms)':>10} {'samples/s':>10} {'/ 1 rank':>9} {'launch, whole (s)':>18}")
    print(f"{1:>5} {one['step'] * 1e3:>10.1f} {128 / one['step']:>10.0f}")
    for count, (results, seconds) in launched.items():
        step = max(result["step"] for result in results)
        assert sorted(result["rank"] for result in results) == list(range(count)), results
        print(f"{count:>5} {step * 1e3:>10.1f} {128 * count / step:>10.0f} {step / one['step']:>8.2f}x {seconds:>18.1f}")


if __name__ == "__main__":
    main()
