"""The ResNet-50 rewrite of bench_speed.py row 2 counted in instructions, not timed: what the wall-clock
ratio means to measure, without the machine's speed in it.

On a shared virtual machine one core's speed moves by up to 2x within minutes: the same in-process
rewrite of the same GraphDef took 572 to 1,446 ms of CPU time in one process, minutes apart, with no
other job running. A wall-clock ratio of two OptimizeGraph calls interleaved still swings by as much
when the speed changes between them. The instructions a call executes do not depend on that speed.

Each configuration (bench_speed.py row 2: only the optimizer named, one Grappler iteration) runs in a
child process under valgrind's callgrind, once with one OptimizeGraph call and once with two; the
difference is one warm call (TensorFlow's import, the MetaGraph's parse, the shim's build and load
cancel out). Two children run at a time. Configurations:

    fixed     Grappler's pruning alone: OptimizeGraph's own cost (the MetaGraph to a Grappler item, the
              graph back), what every row pays
    tf_amp    auto_mixed_precision_cpu
    npu       NpuOptimizer, the precision pass (sim_passes=precision)
    npu_all   NpuOptimizer, every pass (sim_passes=all)

It prints each warm call's instructions and the two ratios of the issue (precision pass <= 1.0x and
whole pipeline <= 1.2x of auto_mixed_precision_cpu), and what each optimizer adds over `fixed`.
Instructions are not time (an instruction of Python's interpreter and one of TensorFlow's C++ are not
equally fast), so this stands beside the timed row, not in place of it.

--graph handed-over counts the same calls on the graph as a Session's Grappler hands it to
auto_mixed_precision_cpu (bench_precision.handed_over: after the optimizers Grappler runs before it; the
function optimizer among them inlines the batch norms' If branches). On the graph as built, Grappler also
runs each optimizer over every library function after the graph, except NpuOptimizer's GeOp body, which
still holds the Ifs there, and the branch functions it calls: those are left to the GeOp's call.

    python benchmarks/count_rewrite_instructions.py [--image-size 224] [--configs fixed,tf_amp,npu,npu_all]
                                                    [--graph as-built|handed-over]

About 25 minutes on 2 cores (each child runs 30-50x slower under callgrind).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CONFIGS = ("fixed", "tf_amp", "npu", "npu_all")
GRAPHS = ("as-built", "handed-over")
TARGETS = {"npu": 1.0, "npu_all": 1.2}
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def child(which: str, calls: int, meta_path: str) -> None:
    """Run OptimizeGraph `calls` times with configuration `which` on the saved MetaGraph."""
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.grappler import tf_optimizer

    import bench_precision

    with open(meta_path, "rb") as handle:
        meta = meta_graph_pb2.MetaGraphDef.FromString(handle.read())
    config = bench_precision.optimize_config(which)
    for _ in range(calls):
        tf_optimizer.OptimizeGraph(config, meta)


def counted(which: str, calls: int, meta_path: str) -> int:
    """Instructions of a child process running `calls` OptimizeGraph calls, under callgrind."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, HERE,
               "--child", which, str(calls), meta_path]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise RuntimeError(f"callgrind run {which} x{calls} failed (exit {done.returncode}):\n{tail}")
    return int(found[-1].replace(",", ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image-size", type=int, default=224, help="Keras ResNet-50's input size (default 224)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of " + ", ".join(CONFIGS))
    parser.add_argument("--graph", choices=GRAPHS, default="as-built",
                        help="the Keras graph as built (default) or as a Session's Grappler hands it over")
    parser.add_argument("--child", nargs=3, metavar=("CONFIG", "CALLS", "META"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    configs = [name for name in args.configs.split(",") if name]
    unknown = [name for name in configs if name not in CONFIGS]
    if unknown or "tf_amp" not in configs:
        parser.error(f"--configs takes {', '.join(CONFIGS)} and needs tf_amp (the baseline); got {args.configs!r}")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: this count needs its callgrind tool (apt-get install valgrind)")
        return 2

    from npu_sim_bridge.testing import models

    model = models.resnet50(batch_size=2, image_size=args.image_size)
    meta = model.meta_graph_def()
    if args.graph == "handed-over":
        import bench_precision

        meta = bench_precision.handed_over(meta)
    with tempfile.TemporaryDirectory() as directory:
        meta_path = os.path.join(directory, "resnet50.meta.pb")
        with open(meta_path, "wb") as handle:
            handle.write(meta.SerializeToString())
        runs = [(which, calls) for which in configs for calls in (1, 2)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # the children are the work
            futures = {run: pool.submit(counted, *run, meta_path) for run in runs}
            refs = {run: future.result() for run, future in futures.items()}
    warm = {which: refs[(which, 2)] - refs[(which, 1)] for which in configs}
    print(f"Keras ResNet-50 training MetaGraph, {args.graph} ({len(meta.graph_def.node)} nodes, "
          f"{len(meta.graph_def.library.function)} library functions, {args.image_size}x"
          f"{args.image_size}), one warm OptimizeGraph call, only the optimizer named, one iteration "
          "(instructions, callgrind)")
    for which in configs:
        print(f"  {which:<8} {warm[which] / 1e9:8.3f} G instructions")
    for which, target in TARGETS.items():
        if which in warm:
            ratio = warm[which] / warm["tf_amp"]
            print(f"  {which} / tf_amp {ratio:5.2f}x target <= {target:.2f} {'met' if ratio <= target else 'MISSED'}")
    if "fixed" in warm:
        added = ", ".join(f"{which} {(warm[which] - warm['fixed']) / 1e9:.3f} G" for which in configs if which != "fixed")
        print(f"  over the fixed cost ({warm['fixed'] / 1e9:.3f} G): {added}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
