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

    steps = summarize(args.trace)
    sys.stdout.write(to_json(steps, args.top) + "\n" if args.json else format_summary(steps, args.top))
    return 0


def add_tool_commands(commands) -> None:
    info = commands.add_parser("info", help="the simulated SoC, operator library, TensorFlow, the shim, and which "
                                            "options act")
    info.add_argument("--ops-info", metavar="DIR", help="operator library folder (default: the built-in one)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(handler=cmd_info)

    profile = commands.add_parser(
        "profile", help="top ops by time, host vs device, per step, from a profiling trace",
        description="TRACE is a trace_step_<k>.json file that profiling_mode wrote, or the profiling_options "
                    "output folder (every step under it). Open the same files in chrome://tracing or Perfetto.")
    profile.add_argument("trace", metavar="TRACE")
    profile.add_argument("--top", type=int, default=10, help="how many ops to list per step (default 10)")
    profile.add_argument("--json", action="store_true", help="print JSON")
    profile.set_defaults(handler=cmd_profile)
