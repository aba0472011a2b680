"""How long a training script takes to print its first loss, plain against simulated, from the process's start.

    python benchmarks/bench_first_loss.py [--models user_cond_mlp,lstm_v1] [--rounds 3]

This is what a user waits for when the script opens: Python and TensorFlow start, the graph is built,
the Session is made and initialised, and the first step runs. bench_cost.py's first-step ratio
measures the last of these alone, in a warm process; on a small model that step takes a few hundredths
of a second, so its ratio is made of the simulator's fixed costs per graph. Here each run is a fresh
process of its own: the plain one imports TensorFlow and builds the model with the shim left unloaded
(NPU_SIM_SKIP_NATIVE=1; it still imports the package's light top level, about 0.03 s, which a plain
script would not), the simulated one also loads the shim and rewrites the graph, whose modules it
imports on the first rewrite like any user's script. Python's compiled modules are kept (in a folder of
the run's own, PYTHONPYCACHEPREFIX, whatever PYTHONDONTWRITEBYTECODE says), as on a user's machine after
the script's first run; one unmeasured process of each kind fills them. Plain and simulated processes
alternate, the best of --rounds kept for each, on the user's configuration and on npu_config_proto's (bench_cost.py's
Session configurations). Each process says how its time split: start-up and imports, building the
graph, the Session and its initializer, the first step.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
MARK = "FIRST_LOSS "
PARTS = ("imports", "build", "session", "first_step")
DEFAULT_MODELS = "tf1_batchnorm_cnn,keras_cnn,user_cond_mlp,user_while_mlp,lstm_v1,bert_small,cnn_channels_first"


def child(model_name: str, config_hex: str) -> None:
    """The script itself: everything from its imports to the first loss, timed, then one MARK line."""
    marks = [time.time()]
    import numpy as np
    import tensorflow as tf

    from npu_sim_bridge.testing import zoo

    marks.append(time.time())
    model = zoo.sweep_builders()[model_name]()
    feed = model.feed(np.random.default_rng(0))
    marks.append(time.time())
    config = tf.compat.v1.ConfigProto.FromString(bytes.fromhex(config_hex))
    sess = tf.compat.v1.Session(graph=model.graph, config=config)
    sess.run(model.init_op)
    marks.append(time.time())
    loss, _ = sess.run([model.loss, model.train_op], feed)
    marks.append(time.time())
    print(MARK + json.dumps({"loss": float(loss), "at": marks[-1], "child_start": marks[0],
                             **{part: marks[i + 1] - marks[i] for i, part in enumerate(PARTS)}}), flush=True)


_pycache: list[str] = []


def pycache_folder() -> str:
    """Where the children keep their compiled modules: one folder for this process's runs, outside the
    source tree, removed when it exits."""
    if not _pycache:
        _pycache.append(tempfile.mkdtemp(prefix="bench_first_loss_pycache_"))
        atexit.register(shutil.rmtree, _pycache[0], True)
    return _pycache[0]


def one_process(model_name: str, config, kind: str) -> dict:
    """Run the script once in a fresh process: {"total": seconds from its start to the first loss, parts...}."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPYCACHEPREFIX": pycache_folder()}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    uses_shim = bool(config.graph_options.rewrite_options.custom_optimizers)
    if not uses_shim:
        env["NPU_SIM_SKIP_NATIVE"] = "1"
    started = time.time()
    done = subprocess.run([sys.executable, HERE, "--child", model_name, config.SerializeToString().hex()],
                          capture_output=True, text=True, env=env, timeout=1800, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise RuntimeError(f"the {kind} script of {model_name} failed: {tail[0]}")
    figures = json.loads(lines[-1][len(MARK):])
    # the interpreter's own start, before the script's first line, belongs to the imports
    figures["imports"] += figures["child_start"] - started
    figures["total"] = figures["at"] - started
    return figures


def measure(model_name: str, setting: str, rounds: int) -> dict:
    """The best of `rounds` alternating plain and simulated processes: {kind: figures}, and the ratio."""
    import bench_cost

    configs = bench_cost.session_configs(setting, layout_plain=model_name in bench_cost.PLAIN_NEEDS_LAYOUT)
    best = {kind: {"total": math.inf} for kind in ("plain", "simulated")}
    for kind in best:  # unmeasured: compiles the modules each kind imports, as a user's first run does
        one_process(model_name, configs[kind], kind)
    for _ in range(rounds):
        for kind in best:
            figures = one_process(model_name, configs[kind], kind)
            if figures["total"] < best[kind]["total"]:
                best[kind] = figures
    return {**best, "ratio": best["simulated"]["total"] / best["plain"]["total"],
            "added_s": best["simulated"]["total"] - best["plain"]["total"]}


HEAD = (f"{'model':<20} {'configuration':<17} {'plain':>7} {'simulated':>9} {'ratio':>6} {'added':>7}   "
        "added by part: imports, build, session, first step")


def line(model_name: str, setting: str, figures: dict) -> str:
    plain, simulated = figures["plain"], figures["simulated"]
    parts = ", ".join(f"{simulated[part] - plain[part]:+.2f}" for part in PARTS)
    return (f"{model_name:<20} {setting:<17} {plain['total']:>6.2f}s {simulated['total']:>8.2f}s "
            f"{figures['ratio']:>5.2f}x {figures['added_s']:>+6.2f}s   {parts}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated sweep models")
    parser.add_argument("--rounds", type=int, default=3, help="processes of each kind, best kept (default 3)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    sys.path.insert(0, os.path.dirname(HERE))
    import bench_cost

    print(f"from the process's start to the first loss line, fresh processes, plain and simulated alternating, "
          f"best of {args.rounds}\n{HEAD}", flush=True)
    for name in args.models.split(","):
        for setting in bench_cost.SETTINGS:
            print(line(name, setting, measure(name, setting, args.rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
