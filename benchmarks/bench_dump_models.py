"""Dumps and compare over the whole model sweep: per model, Session training with enable_dump (steps 0 and 1)
in float32 and mixed precision, the tensors listed and written, ops that ran with no file, the first divergent op.

Run:  .venv/bin/python benchmarks/bench_dump_models.py [--models NAME ...] [--dump-dir DIR] [--keep]
"""

import argparse
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.testing import dump_sweep, zoo  # noqa: E402

tf.compat.v1.disable_eager_execution()


def main() -> int:
    builders = zoo.sweep_builders()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help=f"models to run (default all): {', '.join(builders)}")
    parser.add_argument("--dump-dir", help="where the dumps go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the dumps (they are removed otherwise)")
    args = parser.parse_args()
    unknown = sorted(set(args.models or ()) - set(builders))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(builders)}")
    root = args.dump_dir or tempfile.mkdtemp(prefix="npu_sim_dump_sweep_")
    checks, results, failures = [], {}, []
    for name in args.models or builders:
        model = builders[name]()
        pair = []
        for mode in dump_sweep.MODES:
            try:
                pair.append(dump_sweep.session_dump(name, None, mode, os.path.join(root, name, mode), model=model))
            except Exception as err:  # noqa: BLE001 (a model's failure is a row, the sweep goes on)
                failures.append(f"{name} {mode}: {type(err).__name__}: {str(err).splitlines()[0][:300]}")
        checks.extend(pair)
        if len(pair) == 2:
            results[name] = dump_sweep.compare_modes(*pair)
        print(dump_sweep.table(pair, {name: results[name]} if name in results else None).split("\n", 1)[1],
              flush=True)
        if not args.keep:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    print()
    print(dump_sweep.table(checks, results))
    bad = [c for c in checks if any(c.ran_not_dumped.values()) or any(c.lost.values())]
    for check in bad:
        print(f"{check.model} {check.mode}: ran with no file {check.ran_not_dumped}, lost {check.lost}")
    for line in failures:
        print("failed:", line)
    return 1 if bad or failures else 0


if __name__ == "__main__":
    sys.exit(main())
