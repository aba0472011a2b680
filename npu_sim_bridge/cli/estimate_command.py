"""npu-sim's `estimate` subcommand (thin: parse arguments, call npu_sim_bridge.estimate)."""

from __future__ import annotations

import sys


def _constants(pairs) -> dict:
    from npu_sim_bridge.cli.errors import UsageError

    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--constant expects KEY=NUMBER (a constant of npu_sim_bridge/estimate/hardware.py), "
                             f"got {pair!r}") from None
        if not sep or not key.strip():
            raise UsageError(f"--constant expects KEY=NUMBER, got {pair!r}")
    return values


def cmd_estimate(args) -> int:
    from npu_sim_bridge.cli.main import _parse_params
    from npu_sim_bridge.estimate import estimate
    from npu_sim_bridge.estimate.output import to_csv, to_json, to_text
    from npu_sim_bridge.fileio import check_output_path, write_atomic

    if args.csv:
        check_output_path(args.csv, "--csv")
    step = estimate(args.graph, _parse_params(args.param), batch=args.batch, soc=args.soc, fetches=args.fetch,
                    constants=_constants(args.constant))
    if args.csv:
        write_atomic(args.csv, to_csv(step), "op summary CSV")
    sys.stdout.write(to_json(step, args.top, args.all_ops) + "\n" if args.json else to_text(step, args.top))
    return 0


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def add_estimate_command(commands) -> None:
    from npu_sim_bridge.estimate.hardware import PRESETS

    parser = commands.add_parser(
        "estimate", help="estimate the step time the graph would take on an Ascend 910, per GeOp and op, "
                         "and name its bottlenecks",
        description="Rewrites GRAPH as NpuOptimizer would and costs every op the step runs on the SoC's cube, "
                    "vector unit, AI CPU or the host, plus host<->device copies and the per-run overhead. An "
                    "estimate from a roofline model calibrated on two measured throughputs, not a measurement.")
    parser.add_argument("graph", help="a GraphDef (.pb/.pbtxt), MetaGraphDef (.meta) or SavedModel dir")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter_map option as a Session sets it, e.g. precision_mode=allow_mix_precision "
                             "or iterations_per_loop=100")
    parser.add_argument("--fetch", action="append", default=None, metavar="NAME",
                        help="what each step fetches (default: the MetaGraph's train_op)")
    parser.add_argument("--batch", type=_positive, default=None, metavar="N",
                        help="samples per step: placeholders with an unknown first dimension get N")
    parser.add_argument("--soc", default=None, choices=sorted(PRESETS), help="SoC preset (default Ascend910A)")
    parser.add_argument("--constant", action="append", default=[], metavar="KEY=NUMBER",
                        help="replace a hardware constant (see npu_sim_bridge/estimate/hardware.py)")
    parser.add_argument("--top", type=_positive, default=10, help="how many ops to list (default 10)")
    parser.add_argument("--csv", metavar="FILE", help="also write an op_summary-style CSV (the real profiler's "
                                                       "columns, empty where there is no estimate)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--all-ops", action="store_true",
                        help="with --json: every op of the step with its unit and estimated time (\"ops\")")
    parser.set_defaults(handler=cmd_estimate)
