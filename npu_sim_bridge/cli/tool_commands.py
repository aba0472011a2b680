"""npu-sim's `info` and `profile` subcommands (thin: parse arguments, call npu_sim_bridge.info / profiling)."""

from __future__ import annotations

import json
import sys


def cmd_info(args) -> int:
    from npu_sim_bridge.info import collect_info, format_info

    info = collect_info(args.ops_info)
    sys.stdout.write(json.dumps(info, indent=2) + "\n" if args.json else format_info(info))
    return 0


def cmd_profile(args) -> int:
    from npu_sim_bridge.profiling.summary import format_summary, summarize, to_json

    if args.merge or args.summary or args.csv or args.skip:
        from npu_sim_bridge.profiling.overview import profile_report

        sys.stdout.write(profile_report(args.trace, args.summary or bool(args.csv or args.skip), args.csv,
                                        args.skip or 0, args.merge, args.json))
        return 0
    steps = summarize(args.trace)
    sys.stdout.write(to_json(steps, args.top) + "\n" if args.json else format_summary(steps, args.top))
    return 0


def _count(text: str) -> int:
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of steps (0 or more)")
    return int(text)


def add_tool_commands(commands) -> None:
    info = commands.add_parser("info", help="the simulated SoC, operator library, TensorFlow, the shim, and which "
                                            "options act")
    info.add_argument("--ops-info", metavar="DIR", help="operator library folder (default: the built-in one)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(handler=cmd_info)

    profile = commands.add_parser(
        "profile", help="top ops by time, host vs device, per step, from a profiling trace",
        description="TRACE is a trace_step_<k>.json file that profiling_mode wrote, or the profiling_options "
                    "output folder (every step under it). Each step is named by its role (train, eval, init, "
                    "checkpoint, other), read from its fetches. Open the same files, or the trace_merged.json "
                    "a Session writes when it closes, in chrome://tracing or Perfetto; the \"estimated NPU\" "
                    "process there is npu_sim_bridge.estimate's step on an Ascend 910, not a measurement.")
    profile.add_argument("trace", metavar="TRACE")
    profile.add_argument("--top", type=int, default=10, help="how many ops to list per step (default 10)")
    profile.add_argument("--json", action="store_true", help="print JSON")
    profile.add_argument("--summary", action="store_true",
                         help="an op_summary-style CSV over the steps: per role and op type, count, total, average, "
                              "min, max and share")
    profile.add_argument("--csv", metavar="FILE", help="write the --summary CSV to FILE (implies --summary)")
    profile.add_argument("--skip", metavar="N", type=_count,
                         help="leave each run's first N training steps (warm-up) out of --summary (implies --summary)")
    profile.add_argument("--merge", metavar="OUT", help="write every step's trace into one chrome trace OUT, on one "
                                                        "time line")
    profile.set_defaults(handler=cmd_profile)
