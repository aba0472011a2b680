"""The steady step of small control-flow models under allow_mix_precision: what the float16 emulation's
rounding kernels cost, for one or more source trees, measured in turns.

    python benchmarks/bench_loop_rounding.py [--models lstm_v1,user_while_mlp,user_cond_mlp]
                                             [--trees NAME=PATH,...] [--rounds 3] [--steps 15]

Per tree (a PYTHONPATH to run, e.g. before=/path/to/old/tree; default: this tree), model (testing/zoo.py's
sweep) and configuration (bench_cost.session_configs: user and npu_config_proto), in a child process:
- kernels per step: the kernels one traced step runs (RunOptions FULL_TRACE step_stats; a GeOp's body's
  kernels count, the executor's _Arg/_Retval/NoOp do not), plain and simulated, and of the simulated
  step's the NpuSimRoundToFloat16 and Cast kernels (deterministic: no other job on the machine moves them);
- steady step: a plain and a simulated Session, two warm-up steps each, then interleaved steps; the median
  step of simulated over plain, wall time and this process's CPU time (which other jobs move less).
The trees take turns round by round (tree A's child, tree B's child, A, B, ...), so a change of load on
the machine hits them alike; the figure of each is the median over its rounds, its range beside it.
Target: steady ratio <= 1.10x (bench_cost.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from npu_sim_bridge.graph.op_categories import CALL_OPS  # noqa: E402

MODELS = ("lstm_v1", "user_while_mlp", "user_cond_mlp")
SETTINGS = ("user", "npu_config_proto")
MARK = "BENCH_LOOP_ROUNDING "
NOT_COUNTED = frozenset({"_Arg", "_Retval", "NoOp"}) | CALL_OPS


def kernel_counts(sess, fetch, feed) -> collections.Counter:
    """Kernels one traced step runs, by op type."""
    import tensorflow as tf

    trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    sess.run(fetch, feed, options=trace, run_metadata=metadata)
    counts: collections.Counter = collections.Counter()
    for device in metadata.step_stats.dev_stats:
        for stats in device.node_stats:
            label = stats.timeline_label
            op = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else ""
            if op and op not in NOT_COUNTED:
                counts[op] += 1
    return counts


def measure(name: str, setting: str, steps: int) -> dict:
    """One child's figures of one model and configuration."""
    import numpy
    import tensorflow as tf

    import bench_cost
    import bench_speed
    from npu_sim_bridge.testing import zoo

    model = zoo.sweep_builders(applications=[])[name]()
    configs = bench_cost.session_configs(setting)
    fetch = [model.loss, model.train_op]
    feed = model.feed(numpy.random.default_rng(0))
    sessions = {}
    for kind in ("plain", "simulated"):
        sess = tf.compat.v1.Session(graph=model.graph, config=configs[kind])
        sess.run(model.init_op)
        for _ in range(2):
            sess.run(fetch, feed)
        sessions[kind] = sess
    counts = {kind: kernel_counts(sess, fetch, feed) for kind, sess in sessions.items()}
    wall, cpu = bench_speed.timed_steps(sessions, fetch, feed, steps)
    for sess in sessions.values():
        sess.close()
    plain_wall, plain_cpu = statistics.median(wall["plain"]), statistics.median(cpu["plain"])
    return {
        "plain_ms": plain_wall * 1000,
        "wall": statistics.median(wall["simulated"]) / plain_wall,
        "cpu": statistics.median(cpu["simulated"]) / plain_cpu,
        "kernels_plain": sum(counts["plain"].values()),
        "kernels_simulated": sum(counts["simulated"].values()),
        "round_kernels": counts["simulated"]["NpuSimRoundToFloat16"],
        "casts": counts["simulated"]["Cast"] - counts["plain"]["Cast"],
    }


def child(path: str | None, name: str, setting: str, steps: int, timeout: int) -> dict:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [sys.executable, HERE, "--child", name, setting, "--steps", str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"the measurement of {name} ({setting}) with PYTHONPATH={path or '(this tree)'} "
                       f"failed: {tail}")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f}x ({min(values):.2f}-{max(values):.2f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="sweep models, comma-separated")
    parser.add_argument("--trees", default="",
                        help="NAME=PATH,... source trees to compare (PYTHONPATH of each); default: this tree")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="user, npu_config_proto or both")
    parser.add_argument("--rounds", type=int, default=3, help="child processes per tree, model and setting")
    parser.add_argument("--steps", type=int, default=15, help="interleaved steps per child")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a child may take")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(measure(args.child[0], args.child[1], args.steps)), flush=True)
        return 0
    trees = {}
    for item in filter(None, args.trees.split(",")):
        label, sep, path = item.partition("=")
        if not sep or not os.path.isdir(path):
            parser.error(f"--trees entry {item!r} is not NAME=PATH of a folder; write e.g. before=/tmp/base")
        trees[label] = path
    trees = trees or {"this": None}
    print(f"load before: {os.getloadavg()}", flush=True)
    print(f"{'model':<16} {'setting':<17} {'tree':<10} {'wall':>19} {'cpu':>19} {'plain ms':>9} "
          f"{'kernels plain/sim':>18} {'round':>6} {'cast':>5}", flush=True)
    for name in args.models.split(","):
        for setting in args.settings.split(","):
            rows: dict = {label: [] for label in trees}
            for _ in range(args.rounds):
                for label, path in trees.items():
                    rows[label].append(child(path, name, setting, args.steps, args.timeout))
            for label, results in rows.items():
                first = results[0]
                print(f"{name:<16} {setting:<17} {label:<10} {spread([r['wall'] for r in results]):>19} "
                      f"{spread([r['cpu'] for r in results]):>19} "
                      f"{statistics.median(r['plain_ms'] for r in results):9.2f} "
                      f"{first['kernels_plain']:>8}/{first['kernels_simulated']:<9} {first['round_kernels']:>6} "
                      f"{first['casts']:>5}", flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
