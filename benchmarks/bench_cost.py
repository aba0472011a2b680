"""What a simulated run costs, every figure in one run: the first and steady step of each sweep model, the
small models' first loss line, the ResNet-50 rewrite and the 2-rank allreduce, on the user's configuration and
on npu_config_proto's.

    python benchmarks/bench_cost.py [--models all|A,B] [--rounds 2] [--quick]
                                    [--parts models,first-loss,rewrite,allreduce]
                                    [--json OUT]

The two configurations (bench_speed.step_config; simulated: allow_mix_precision, every pass, the default
float16 rounding), each with the same session options on both sides:
    user              a hand-built ConfigProto naming NpuOptimizer (Grappler's remapper on), as the seed
                      scripts write it; plain is ConfigProto()
    npu_config_proto  that ConfigProto through npu_config_proto (remapper off, the memory optimizer as the
                      hand-built config left it); plain is the same ConfigProto without the NpuOptimizer

1. Every sweep model (testing/zoo.py sweep_builders(), its small sizes), each in a fresh process, so the
   kernels and functions one model loaded do not speed up the next model's first step; in that process
   the user configuration is measured first, then npu_config_proto (its plain and simulated sides are
   equally warm: the first step of both is best of the rounds):
   - first step (bench_first_step.first_step): fresh Sessions, plain and simulated interleaved, best of
     --rounds, the variables' initializer run before and not counted; target simulated <= 1.3x plain;
     beside it (column cpu) the ratio of the process's CPU seconds of the step, lowest of the rounds,
     which another job on the machine moves less than the wall time; column floor: the first step with the
     partition pass alone (sim_passes=partition) over plain, what the GeOps cost by themselves (instantiating
     their bodies, Grappler over a graph with a function library); column rewrite: the seconds NpuOptimizer's
     Python entry took in the simulated first step (the rewrite and its checks);
   - steady step (bench_speed.session_ratios): two Sessions, two warm-up steps each, then interleaved
     steps, at least 5 a round and as many more as fill STEADY_ROUND_S seconds of plain steps (a model
     of 1 ms steps runs hundreds); per round the median step of simulated over plain; the median of the
     rounds (and their range); target <= 1.10x.
2. First loss line (bench_first_loss.py): the script from its process's start to its first loss, fresh
   processes, plain and simulated alternating, best of --rounds; on the models whose plain first step
   took under FIRST_LOSS_BELOW_S in part 1 (all the named ones when part 1 is not run): what the user of
   a small model waits for, where the first step alone is a few hundredths of a second; target the first
   step's, simulated <= 1.3x plain.
3. ResNet-50 rewrite (bench_speed.py row 2, Keras ResNet50 as users build it, batch 2 at 64x64: the
   nodes of the 224x224 graph, a quarter of its constant folding): the precision pass and the whole
   pipeline over auto_mixed_precision_cpu, one Grappler iteration with only that optimizer (the harness:
   no Session configuration enters), and per configuration NpuOptimizer's own time in a Session's whole
   Grappler run; 3 interleaved repeats (quick 2); targets <= 1.0x and <= 1.2x.
4. Allreduce (sum, float32) of 1, 16 and 64 MiB across 2 ranks on localhost (`npu-sim launch --nproc 2`,
   hccl_ops.allreduce as bench_multirank.py builds it), a Session of each configuration; beside it the
   floor: TensorFlow's plain send/recv copy of the same bytes between two servers on this machine
   (bench_allreduce_knobs.py), measured right after; target >= 1 GB/s at 64 MiB.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SETTINGS = ("user", "npu_config_proto")
TARGETS = {"first": 1.3, "steady": 1.10, "precision": 1.0, "pipeline": 1.2}
# A steady round lasts at least this long on the plain side: at five steps of a millisecond, one
# scheduler wake-up in a round moved a small model's ratio by 0.1 (lstm_v1: 1.04x in one run, 1.22x in
# the next); at 0.5 s the range over rounds stays within a few hundredths.
STEADY_ROUND_S = 0.5
ALLREDUCE_TARGET_GBPS = 1.0  # at 64 MiB
MIB = 1 << 20
MARK = "BENCH_COST "
PARTS = ("models", "first-loss", "rewrite", "allreduce")
# The first-loss part runs on the models whose plain first step (the models part of the same run) took
# under this: there the first-step ratio divides hundredths of a second (bench_first_loss.py).
FIRST_LOSS_BELOW_S = 1.0
# Sweep models plain TensorFlow cannot run on a CPU: their plain side is NpuOptimizer with sim_passes=none
# (the sweep's own float32 reference: no pass but the CPU layout that lets the CPU run the graph).
PLAIN_NEEDS_LAYOUT = {"cnn_channels_first": "plain TensorFlow runs no NCHW max pooling on a CPU"}


# ------------------------------------------------------------------------------------ measured in a child
def session_configs(setting: str, layout_plain: bool = False) -> dict:
    """{"plain": ConfigProto, "simulated": ConfigProto, "geop_floor": ConfigProto} of one configuration (user |
    npu_config_proto); `layout_plain`: the plain side keeps NpuOptimizer with sim_passes=none (PLAIN_NEEDS_LAYOUT).
    "geop_floor" runs the partition pass alone (sim_passes=partition): the graph cut into the same kind of GeOp
    calls, nothing lowered to float16, so its steady step is what TensorFlow's function calls cost by themselves."""
    import bench_speed

    if setting not in SETTINGS:
        raise ValueError(f"unknown configuration {setting!r}: use one of {', '.join(SETTINGS)}")
    plain = bench_speed.step_config(setting, "auto" if layout_plain else "plain")
    if layout_plain:
        (custom,) = plain.graph_options.rewrite_options.custom_optimizers
        custom.parameter_map["sim_passes"].s = b"none"
    floor = bench_speed.step_config(setting, "auto")
    (custom,) = floor.graph_options.rewrite_options.custom_optimizers
    custom.parameter_map["sim_passes"].s = b"partition"
    return {"plain": plain, "simulated": bench_speed.step_config(setting, "auto"), "geop_floor": floor}


def model_row(name: str, settings=SETTINGS, rounds: int = 2, steady_rounds: int = 3, steady_steps: int = 5,
              steady_round_s: float = STEADY_ROUND_S) -> dict:
    """The first-step and steady-step figures of one sweep model under each configuration in `settings`."""
    import numpy as np

    import bench_first_step
    import bench_speed
    from npu_sim_bridge.testing import zoo
    from npu_sim_bridge.testing.grappler import EntryCallLog

    builders = zoo.sweep_builders()
    if name not in builders:
        raise ValueError(f"unknown sweep model {name!r}: choose from {', '.join(builders)}")
    model = builders[name]()
    feed = model.feed(np.random.default_rng(0))
    row = {"model": name, "nodes": len(model.graph.as_graph_def().node)}
    if name in PLAIN_NEEDS_LAYOUT:
        row["plain"] = f"NpuOptimizer sim_passes=none ({PLAIN_NEEDS_LAYOUT[name]})"
    for setting in settings:
        configs = session_configs(setting, layout_plain=name in PLAIN_NEEDS_LAYOUT)
        best = {kind: math.inf for kind in configs}
        cpu = {kind: [] for kind in best}  # the process's CPU seconds of each first step (load moves them less)
        entry = {}  # NpuOptimizer's Python entry (the rewrite) in the best round of each kind
        for _ in range(rounds):
            for kind, proto in configs.items():
                with EntryCallLog() as calls:  # the initializer's graph is rewritten too: not counted
                    seconds = bench_first_step.first_step(model, kind, feed, proto=proto, cpu=cpu[kind],
                                                          before_step=calls.calls.clear)[0]
                if seconds < best[kind]:
                    best[kind], entry[kind] = seconds, sum(call_seconds for _item, call_seconds in calls.calls)
        ratios = bench_speed.session_ratios(model, configs, steady_rounds, steady_steps, steady_round_s)
        row[setting] = {
            "first_plain_s": best["plain"], "first_simulated_s": best["simulated"],
            "first": best["simulated"] / best["plain"],
            "first_cpu": min(cpu["simulated"]) / min(cpu["plain"]),
            # the first step with the partition pass alone: TensorFlow's function machinery (instantiating the
            # GeOp bodies, Grappler over a graph with a library) and the pipeline's fixed cost, without float16
            "first_geop_floor": best["geop_floor"] / best["plain"],
            "first_rewrite_s": entry.get("simulated", 0.0) - entry.get("plain", 0.0),
            "first_floor_rewrite_s": entry.get("geop_floor", 0.0) - entry.get("plain", 0.0),  # in the JSON only
            "steady_plain_ms": statistics.median(ratios["plain_ms"]),
            "steady": statistics.median(ratios["simulated"]),
            "steady_range": [min(ratios["simulated"]), max(ratios["simulated"])],
            "steady_geop_floor": statistics.median(ratios["geop_floor"]),
            "steady_steps": ratios["steps"][0],
        }
    return row


def rewrite_figures(quick: bool, repeats: int) -> dict:
    """bench_speed.py's row 2 (it prints its lines); {"harness": {...}, "user": {...}, "npu_config_proto": {...}}."""
    import bench_speed

    figures = bench_speed.rewrite_time(argparse.Namespace(quick=quick, repeats=repeats))
    return {"harness": {key: figures[key] for key in ("precision", "pipeline", "floor")},
            "handed_over": figures["handed_over"], **{setting: figures[setting] for setting in SETTINGS}}


def allreduce_rank(rounds: int, steps: int) -> None:
    """In each rank of `npu-sim launch`: the allreduce's seconds per size, in a Session of each configuration."""
    import bench_multirank
    from npu_bridge.hccl import hccl_ops
    from npu_bridge.npu_init import get_rank_id, tf

    ops = bench_multirank._allreduce_ops(tf, hccl_ops, variants=("after",))
    result = {"rank": get_rank_id()}
    for setting in SETTINGS:  # one Session at a time, in the same order on both ranks
        with tf.Session(config=session_configs(setting)["simulated"]) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(rounds):
                for size in bench_multirank.SIZES_MIB:
                    key = f"{setting} {size}"
                    cpu_started = time.process_time()
                    seconds = bench_multirank._measure(sess, ops[f"after {size}"], steps)
                    cpu = (time.process_time() - cpu_started) / (steps + 3)  # _measure runs 3 warm-up steps
                    if seconds < result.get(key, math.inf):
                        result[key], result[f"cpu {key}"] = seconds, cpu
    print(bench_multirank.MARK + json.dumps(result), flush=True)


def allreduce_figures(rounds: int, steps: int) -> dict:
    """{setting: {size: MB/s}, "floor": {size: MB/s}}; the slower rank's time counts."""
    import bench_allreduce_knobs
    import bench_multirank

    results = bench_multirank._run(["launch", "--nproc", "2", "--", HERE, "--part", "allreduce-rank",
                                    "--rounds", str(rounds), "--steps", str(steps)])
    figures = {setting: {size: size * MIB / max(r[f"{setting} {size}"] for r in results) / 1e6
                         for size in bench_multirank.SIZES_MIB} for setting in SETTINGS}
    # The CPU-bound ceiling: the bandwidth if both ranks' CPU seconds of a run shared this machine's cores
    # perfectly. The collective runtime copies each byte through protobuf strings several times, so its CPU
    # per MiB, not the loopback, bounds the bandwidth on a small machine.
    cores = os.cpu_count() or 1
    figures["ceiling"] = {setting: {size: size * MIB / (sum(r[f"cpu {setting} {size}"] for r in results) / cores) / 1e6
                                    for size in bench_multirank.SIZES_MIB} for setting in SETTINGS}
    figures["cpu ms per MiB"] = {setting: {size: max(r[f"cpu {setting} {size}"] for r in results) * 1e3 / size
                                           for size in bench_multirank.SIZES_MIB} for setting in SETTINGS}
    best, cpu = bench_allreduce_knobs.measure(list(bench_multirank.SIZES_MIB), rounds, steps,
                                              names=[bench_allreduce_knobs.FLOOR])
    figures["floor"] = {size: size * MIB / seconds / 1e6 for size, seconds in best[bench_allreduce_knobs.FLOOR].items()}
    figures["floor cpu ms per MiB"] = {size: seconds * 1e3 / size for size, seconds in cpu[bench_allreduce_knobs.FLOOR].items()}
    return figures


# ------------------------------------------------------------------------------------ the run and its table
def child(part: list[str], timeout: int) -> dict:
    """Run this script on one part in a fresh process; its figures, or {"error": ...}. Its other output is shown."""
    done = subprocess.run([sys.executable, HERE, *part], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    for line in done.stdout.splitlines():
        if not line.startswith(MARK) and line.strip():
            print(f"    {line}", flush=True)
    if done.returncode != 0 or not lines:
        return {"error": error_line(done.stderr) or f"exit status {done.returncode}"}
    return json.loads(lines[-1][len(MARK):])


def error_line(stderr: str) -> str:
    """The exception's own line of a child's traceback (TensorFlow's: the line after `Node: ...`)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    if not errors:
        return lines[-1][:200] if lines else ""
    index = errors[-1]
    text = lines[index]
    node = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("Node: ")), None)
    if node is not None and node + 1 < len(lines):
        text += f" {lines[node]} {lines[node + 1]}"
    return text[:240]


def verdict(value: float, target: float, at_most: bool = True) -> str:
    if not math.isfinite(value):
        return "n/a"
    return "met" if (value <= target if at_most else value >= target) else "NOT MET"


MODEL_HEAD = (f"{'model':<20} {'nodes':>6}  {'configuration':<17} {'first plain':>11} {'simulated':>10} {'ratio':>7} "
              f"{'<=1.30x':>8} {'cpu':>6} {'floor':>6} {'rewrite':>8}  {'steady plain':>12} {'ratio (range)':>20} {'<=1.10x':>8} {'GeOp floor':>10}")


def model_table(rows: list[dict]) -> str:
    notes = [f"* {row['model']}: plain is {row['plain']}" for row in rows if "plain" in row]
    return "\n".join([MODEL_HEAD, "-" * len(MODEL_HEAD)] + [line for row in rows for line in model_lines(row)] + notes)


def model_lines(row: dict) -> list[str]:
    """One line per configuration: the first step's seconds and ratio, the steady step's, each with its verdict."""
    lines = []
    for setting in SETTINGS:
        start = f"{row['model'] + ('*' if 'plain' in row else ''):<20} {row.get('nodes', 0):>6}  {setting:<17}"
        if "error" in row:
            lines.append(f"{start} failed: {row['error']}")
            continue
        figures = row.get(setting)
        if figures is None:
            lines.append(f"{start} not measured")
            continue
        low, high = figures["steady_range"]
        lines.append(
            f"{start} {figures['first_plain_s']:>9.2f} s {figures['first_simulated_s']:>8.2f} s "
            f"{figures['first']:>6.2f}x {verdict(figures['first'], TARGETS['first']):>8} "
            f"{figures.get('first_cpu', math.nan):>5.2f}x {figures.get('first_geop_floor', math.nan):>5.2f}x "
            f"{figures.get('first_rewrite_s', math.nan):>6.2f} s  "
            f"{figures['steady_plain_ms']:>9.1f} ms {figures['steady']:>6.2f}x ({low:.2f}-{high:.2f}) "
            f"{verdict(figures['steady'], TARGETS['steady']):>8} {figures.get('steady_geop_floor', math.nan):>9.2f}x")
    return lines


def rewrite_table(figures: dict) -> str:
    if "error" in figures:
        return f"ResNet-50 rewrite: failed: {figures['error']}"
    lines = [f"{'ResNet-50 rewrite / auto_mixed_precision_cpu':<58} {'precision pass':>22} {'<=1.0x':>8} "
             f"{'whole pipeline':>22} {'<=1.2x':>8}"]
    for label, key in (("harness (only the optimizer named, one iteration)", "harness"),
                       ("the same, on the graph as a Session hands it over", "handed_over"),
                       ("user: NpuOptimizer's time in a Session's Grappler run", "user"),
                       ("npu_config_proto: the same", "npu_config_proto")):
        cells = []
        if key not in figures:  # a JSON of an older run has no handed-over graph
            continue
        for which in ("precision", "pipeline"):
            ratios = figures[key][which]
            median = statistics.median(ratios)
            cells.append(f"{median:>6.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) {verdict(median, TARGETS[which]):>8}")
        lines.append(f"{label:<58} " + " ".join(f"{cell:>31}" for cell in cells))
    return "\n".join(lines)


def allreduce_table(figures: dict) -> str:
    if "error" in figures:
        return f"allreduce: failed: {figures['error']}"
    lines = [f"{'allreduce, 2 ranks (MB/s)':<28} {'size':>7} {'allreduce':>10} {'send/recv floor':>16} "
             f"{'/ floor':>8} {'>=1 GB/s at 64 MiB':>19} {'CPU ceiling':>12} {'/ ceiling':>10} "
             f"{'CPU ms/MiB':>11} {'floor CPU ms/MiB':>17}"]
    for setting in SETTINGS:
        for size, bandwidth in figures[setting].items():
            floor = figures["floor"][size]
            target = verdict(bandwidth / 1000, ALLREDUCE_TARGET_GBPS, at_most=False) if int(size) == 64 else ""
            line = (f"{setting:<28} {size:>3} MiB {bandwidth:>10.0f} {floor:>16.0f} {bandwidth / floor:>7.2f}x "
                    f"{target:>19}")
            if "ceiling" in figures:  # a JSON of an older run has no CPU figures
                ceiling = figures["ceiling"][setting][size]
                line += (f" {ceiling:>12.0f} {bandwidth / ceiling:>9.2f}x {figures['cpu ms per MiB'][setting][size]:>11.2f}"
                         f" {figures['floor cpu ms per MiB'][size]:>17.2f}")
            lines.append(line)
    if "ceiling" in figures:
        lines.append(f"CPU ceiling: the bandwidth if the 2 ranks' process CPU seconds per run shared the {os.cpu_count()} "
                     "cores perfectly; CPU ms/MiB: the slower rank's, per MiB reduced (floor: the receiving side's)")
    return "\n".join(lines)


def summary(result: dict) -> str:
    """How many figures meet their target, and which do not."""
    checks = []
    for row in result.get("models", []):
        for setting in SETTINGS:
            for key in ("first", "steady"):
                if setting in row:
                    checks.append((f"{row['model']} {setting} {key}", row[setting][key], TARGETS[key], True))
    for row in result.get("first_loss", []):
        for setting in SETTINGS:
            if setting in row:
                checks.append((f"{row['model']} {setting} first loss", row[setting]["ratio"], TARGETS["first"], True))
    rewrite = result.get("rewrite", {})
    for key in ("harness", "handed_over", *SETTINGS):
        for which in ("precision", "pipeline"):
            if key in rewrite:
                checks.append((f"ResNet-50 {key} {which}", statistics.median(rewrite[key][which]), TARGETS[which], True))
    allreduce = result.get("allreduce", {})
    for setting in SETTINGS:
        if setting in allreduce:
            bandwidth = allreduce[setting].get("64", allreduce[setting].get(64))
            checks.append((f"allreduce 64 MiB {setting} (GB/s)", bandwidth / 1000, ALLREDUCE_TARGET_GBPS, False))
    missed = [f"{label} {value:.2f}" for label, value, target, at_most in checks
              if verdict(value, target, at_most) != "met"]
    failed = [row["model"] for row in result.get("models", []) if "error" in row]
    failed += [f"{row['model']} first loss" for row in result.get("first_loss", []) if "error" in row]
    failed += [part for part in ("rewrite", "allreduce") if "error" in result.get(part, {})]
    text = f"targets met: {len(checks) - len(missed)} of {len(checks)}"
    text += f"; not met: {', '.join(missed)}" if missed else ""
    return text + (f"; failed: {', '.join(failed)}" if failed else "")


def header() -> str:
    import npu_sim_bridge  # light: the package imports TensorFlow lazily

    folder = os.path.dirname(os.path.dirname(os.path.abspath(npu_sim_bridge.__file__)))
    commit = subprocess.run(["git", "-C", folder, "log", "-1", "--format=%h %cd", "--date=format:%H:%M"],
                            capture_output=True, text=True, check=False).stdout.strip() or "not a git tree"
    return (f"npu_sim_bridge from {folder} ({commit}); {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="all", help="comma-separated sweep models, or all")
    parser.add_argument("--rounds", type=int, help="first step: rounds, best kept (default 2, quick 1)")
    parser.add_argument("--quick", action="store_true",
                        help="one first-step round, fewer steady steps, ResNet-50 at 64x64, a shorter allreduce")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, run in the order given, of {', '.join(PARTS)}")
    parser.add_argument("--json", metavar="OUT", help="also write every figure to this JSON file")
    parser.add_argument("--show", metavar="JSON", help="print the table of saved figures (comma-separated files of "
                        "runs split in parts, merged) and measure nothing")
    parser.add_argument("--before", metavar="JSON", help="with --show: the saved figures of an older tree (comma-"
                        "separated files), printed beside them")
    parser.add_argument("--part", help=argparse.SUPPRESS)  # a child's one part
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 2)
    steady = (2, 5) if args.quick else (3, 5)
    if args.part:
        return run_part(args, rounds, steady)
    if args.show:
        print_tables(merged(args.show.split(",")), "saved")
        if args.before:
            print("\n" + before_after(merged(args.before.split(",")), merged(args.show.split(","))))
        return 0
    parts = [part for part in args.parts.split(",") if part]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}: use {', '.join(PARTS)}")
    from npu_sim_bridge.testing import zoo

    known = list(zoo.sweep_builders())
    names = known if args.models == "all" else [name for name in args.models.split(",") if name]
    if any(name not in known for name in names):
        parser.error(f"unknown model(s) {', '.join(n for n in names if n not in known)}: choose from {', '.join(known)}")
    print(header(), flush=True)
    result: dict = {"header": header(), "rounds": rounds, "steady": steady}
    began = time.perf_counter()
    for part in parts:  # in the order given: a run cut short keeps the parts that came first
        if part == "models":
            run_models(args, names, rounds, steady, result)
        elif part == "first-loss":
            run_first_loss(first_loss_models(names, result), rounds, result, args.json)
        elif part == "rewrite":
            print("\n(3) ResNet-50 rewrite (bench_speed.py row 2)", flush=True)
            result["rewrite"] = child(["--part", "rewrite", "--rounds", str(rounds)] + (["--quick"] * args.quick), 1800)
        else:
            print("\n(4) allreduce across 2 ranks, and the send/recv floor", flush=True)
            try:
                result["allreduce"] = allreduce_figures(1 if args.quick else 2, 5 if args.quick else 10)
            except SystemExit as err:  # the launchers exit with the failing rank's stderr: a row, not the end
                result["allreduce"] = {"error": str(err).strip().splitlines()[-1][:200]}
        save(args.json, result)
    print_tables(result, f"{time.perf_counter() - began:.0f} s")
    save(args.json, result)
    return 0


def print_tables(result: dict, note: str) -> None:
    print(f"\n==== every cost figure, simulated / plain, on both configurations ({note}) ====")
    for line in result.get("headers", [result.get("header", "")]):
        print(line)
    if "models" in result:
        print(model_table(result["models"]))
    if "first_loss" in result:
        print("\n" + first_loss_table(result["first_loss"]))
    if "rewrite" in result:
        print("\n" + rewrite_table(result["rewrite"]))
    if "allreduce" in result:
        print("\n" + allreduce_table(result["allreduce"]))
    print("\n" + summary(result), flush=True)


def before_after(before: dict, after: dict) -> str:
    """The models both have, per configuration: first-step and steady-step ratios before and after."""
    rows = {row["model"]: row for row in before.get("models", []) if "error" not in row}
    lines = [f"{'model':<20} {'configuration':<17} {'first before':>12} {'after':>7} {'steady before':>13} {'after':>7}"]
    for row in after.get("models", []):
        old = rows.get(row["model"])
        for setting in SETTINGS:
            if old is None or setting not in old or setting not in row:
                continue
            lines.append(f"{row['model']:<20} {setting:<17} {old[setting]['first']:>11.2f}x {row[setting]['first']:>6.2f}x "
                         f"{old[setting]['steady']:>12.2f}x {row[setting]['steady']:>6.2f}x")
    return "\n".join(lines)


def merged(paths: list[str]) -> dict:
    """The figures of several saved runs: their model rows in turn, the other parts from the last run that has them."""
    result: dict = {"headers": [], "models": []}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            part = json.load(handle)
        result["headers"].append(part.get("header", path))
        result["models"] += part.get("models", [])
        result.update({key: part[key] for key in ("first_loss", "rewrite", "allreduce") if key in part})
    return result


def run_models(args, names: list[str], rounds: int, steady: tuple, result: dict) -> None:
    print(f"\n(1) first step (fresh Sessions, interleaved, best of {rounds}) and steady step ({steady[0]} rounds of "
          f"at least {steady[1]} interleaved steps and {STEADY_ROUND_S} s) of the sweep's models, simulated / plain, "
          "each model in a fresh process", flush=True)
    result["models"] = []
    print(MODEL_HEAD, flush=True)
    for name in names:
        started = time.perf_counter()
        row = child(["--part", "model", "--models", name, "--rounds", str(rounds)] + (["--quick"] * args.quick),
                    timeout=1800)
        row.setdefault("model", name)
        result["models"].append(row)
        print("\n".join(model_lines(row)) + f"   [{time.perf_counter() - started:.0f} s]", flush=True)
        save(args.json, result)  # after each model: a run cut short keeps its rows


def first_loss_models(names: list[str], result: dict) -> list[str]:
    """The named models whose plain first step in this run's models part took under FIRST_LOSS_BELOW_S
    (on either configuration); all of them when the models part did not run first."""
    if "models" not in result:
        return names
    return [row["model"] for row in result["models"] if row["model"] in names and "error" not in row
            and min(row[setting]["first_plain_s"] for setting in SETTINGS if setting in row) < FIRST_LOSS_BELOW_S]


def run_first_loss(names: list[str], rounds: int, result: dict, json_path: str | None) -> None:
    import bench_first_loss

    print(f"\n(2) first loss line, from the process's start (bench_first_loss.py; fresh processes, plain and "
          f"simulated alternating, best of {rounds}), models whose plain first step took under "
          f"{FIRST_LOSS_BELOW_S:.0f} s\n{bench_first_loss.HEAD}", flush=True)
    result["first_loss"] = []
    for name in names:
        row: dict = {"model": name}
        for setting in SETTINGS:
            try:
                row[setting] = bench_first_loss.measure(name, setting, rounds)
            except RuntimeError as err:  # a script that fails is a row saying so, not the end of the run
                row["error"] = str(err)
                print(f"{name:<20} {setting:<17} FAILED: {err}", flush=True)
                break
            print(bench_first_loss.line(name, setting, row[setting]), flush=True)
        result["first_loss"].append(row)
        save(json_path, result)


def first_loss_table(rows: list[dict]) -> str:
    import bench_first_loss

    lines = [bench_first_loss.HEAD, "-" * len(bench_first_loss.HEAD)]
    for row in rows:
        lines += [bench_first_loss.line(row["model"], setting, row[setting]) for setting in SETTINGS if setting in row]
        if "error" in row:
            lines.append(f"{row['model']:<20} FAILED: {row['error']}")
    return "\n".join(lines)


def save(path: str | None, result: dict) -> None:
    if path:
        with open(path + ".partial", "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
        os.replace(path + ".partial", path)


def run_part(args, rounds: int, steady: tuple) -> int:
    """A child's part: its figures on one MARK line."""
    if args.part == "model":
        figures = model_row(args.models, SETTINGS, rounds, *steady)
    elif args.part == "rewrite":
        figures = rewrite_figures(True, 2 if args.quick else 3)
    elif args.part == "allreduce-rank":
        allreduce_rank(args.rounds or 2, args.steps or 10)
        return 0
    else:
        raise SystemExit(f"unknown --part {args.part!r}: use model, rewrite or allreduce-rank")
    print(MARK + json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
