"""The first native build, as `python -m npu_sim_bridge.native.build` does it, from an empty cache folder.

    .venv/bin/python benchmarks/bench_native_build.py [--repeats 2]

For each of the three libraries (the NpuOptimizer shim, the name index, the NPU op library): the wall time
of its build and the compiler's CPU time (user + system of the child processes), which a loaded machine
changes less than the wall time. Each repeat builds into a new temporary NPU_SIM_CACHE_DIR. The machine's
load average is printed with the figures, since the wall time depends on it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from npu_sim_bridge.native import build as native_build

    libraries = [("shim", native_build.SOURCE, native_build.LIBRARY_NAME),
                 ("name index", native_build.INDEX_SOURCE, native_build.INDEX_LIBRARY_NAME),
                 ("NPU ops", native_build.OPS_SOURCE, native_build.OPS_LIBRARY_NAME)]
    walls = {name: [] for name, _, _ in libraries}
    cpus = {name: [] for name, _, _ in libraries}
    for _ in range(args.repeats):
        folder = tempfile.mkdtemp(prefix="npu_sim_build_bench_")
        os.environ["NPU_SIM_CACHE_DIR"] = folder
        try:
            for name, source, library in libraries:
                cpu, start = _children_cpu(), time.perf_counter()
                native_build.build(source=source, library=library)
                walls[name].append(time.perf_counter() - start)
                cpus[name].append(_children_cpu() - cpu)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"first native build, {args.repeats} repeat(s), {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'library':<12} {'wall s (median, min-max)':<28} {'compiler CPU s (median)':<24}")
    for name, _, _ in libraries:
        wall = walls[name]
        print(f"{name:<12} {statistics.median(wall):6.1f} ({min(wall):.1f}-{max(wall):.1f}){'':<13} "
              f"{statistics.median(cpus[name]):6.1f}")
    total_wall = [sum(values) for values in zip(*walls.values())]
    total_cpu = [sum(values) for values in zip(*cpus.values())]
    print(f"{'all three':<12} {statistics.median(total_wall):6.1f} ({min(total_wall):.1f}-{max(total_wall):.1f})"
          f"{'':<13} {statistics.median(total_cpu):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
