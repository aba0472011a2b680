"""npu-sim: inspect and rewrite graphs offline with the NpuOptimizer pipeline.

Exit statuses and error output: see npu_sim_bridge.cli.errors.
"""

from __future__ import annotations

import argparse
import os
import sys

from npu_sim_bridge.cli.params import parse_params
from npu_sim_bridge.cli.errors import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, Parser, UsageError,
                                      report_error)
from npu_sim_bridge.errors import NpuSimError

# Subcommands that only read files and rewrite graphs offline: they never compile or load the shim.
OFFLINE_COMMANDS = frozenset({"inspect", "rewrite", "mixlist", "fusion-rules", "compare", "overflow", "info",
                              "profile", "estimate"})

# Subcommands that run without TensorFlow installed.
NO_TENSORFLOW_COMMANDS = frozenset({"completion"})


def _add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="a GraphDef (.pb/.pbtxt), MetaGraphDef (.meta) or SavedModel dir")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter_map option, e.g. precision_mode=allow_mix_precision")
    parser.add_argument("--fetch", action="append", default=None, metavar="NAME",
                        help="a tensor or node the caller fetches (default: the MetaGraph's train_op)")
    parser.add_argument("--report-dir", metavar="DIR", default=None,
                        help="write the report, the graphs before/after (.pbtxt), a TensorBoard run and an HTML "
                             "picture there (the option sim_report_dir)")


def _rewrite(args, prune=False):
    from npu_sim_bridge.api import rewrite

    params = parse_params(args.param)
    if args.report_dir:
        params["sim_report_dir"] = args.report_dir
    return rewrite(args.graph, params, fetches=args.fetch, prune=prune)


def cmd_inspect(args) -> int:
    result = _rewrite(args, prune=True)  # what a Session run of the fetches rewrites: no initializers
    if args.json:
        sys.stdout.write(result.report.to_json() + "\n")
    else:
        sys.stdout.write(result.report.to_text(max_nodes=args.max_nodes))
    return 0


def cmd_rewrite(args) -> int:
    from google.protobuf import text_format

    from npu_sim_bridge.fileio import check_output_path, write_atomic

    check_output_path(args.output, "-o")  # before the rewrite: a wrong path costs no work
    if args.report:
        check_output_path(args.report, "--report")
    result = _rewrite(args)
    if args.output.endswith((".pbtxt", ".txt")):
        data = text_format.MessageToString(result.graph_def).encode("utf-8")
    else:
        data = result.graph_def.SerializeToString()
    write_atomic(args.output, data, "rewritten graph")
    if args.report:
        write_atomic(args.report, result.report.to_json(), "report")
    summary = result.report.summary
    if args.json:
        import json

        sys.stdout.write(json.dumps({"output": args.output, "report": args.report,
                                     "nodes_before": summary["nodes_before"],
                                     "nodes_after": summary["nodes_after"]}) + "\n")
    else:
        print(f"wrote {args.output}: {summary['nodes_before']} nodes in, {summary['nodes_after']} out")
    return 0


def cmd_run(args) -> int:
    from npu_sim_bridge.cli.run import run_command
    from npu_sim_bridge.runtime.alias import NpuBridgeAliasError

    try:
        return run_command(args.script, args.script_args, shadow=args.shadow_real_npu_bridge,
                           all_sessions=args.all_sessions, tf1=not args.tf2)
    except NpuBridgeAliasError as err:  # the script is missing, or a real npu_bridge needs the flag
        raise UsageError(str(err)) from None


def cmd_mixlist(args) -> int:
    import json

    from npu_sim_bridge.passes.precision.lists import explain_mixlist, format_rows

    rows, warnings = explain_mixlist(args.ops, modify_mixlist=args.modify_mixlist, ops_info=args.ops_info)
    if args.json:
        sys.stdout.write(json.dumps({"ops": rows, "warnings": warnings}, indent=2) + "\n")
    else:
        for text in warnings:
            print(f"npu-sim mixlist: warning: {text}", file=sys.stderr)
        sys.stdout.write(format_rows(rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="npu-sim", description="Simulate Ascend's NpuOptimizer graph rewrite on plain TensorFlow.")
    from npu_sim_bridge import __version__

    parser.add_argument("--version", action="version", version=f"npu-sim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser("inspect", help="rewrite a graph and print the report")
    _add_graph_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print the JSON report")
    inspect.add_argument("--max-nodes", type=int, default=50,
                         help="how many node decisions the text report lists (default 50)")
    inspect.set_defaults(handler=cmd_inspect)

    rewrite = commands.add_parser("rewrite", help="rewrite a graph and write the result")
    _add_graph_arguments(rewrite)
    rewrite.add_argument("-o", "--output", required=True, help="output GraphDef (.pb or .pbtxt)")
    rewrite.add_argument("--report", help="also write the JSON report to this file")
    rewrite.add_argument("--json", action="store_true", help="print what was written as JSON (output, report, "
                                                             "nodes_before, nodes_after)")
    rewrite.set_defaults(handler=cmd_rewrite)

    run = commands.add_parser(
        "run", help="run a script written for npu_bridge, as `python script.py args...` would, on the simulator",
        description="Runs SCRIPT with `import npu_bridge...` mapped onto npu_sim_bridge (never over a real "
                    "npu_bridge unless --shadow-real-npu-bridge), and with the script's own `import tensorflow` "
                    "giving TensorFlow 1.15's API (tf.compat.v1 plus tf.contrib, v2 behaviour off) unless --tf2.")
    run.add_argument("--all-sessions", action="store_true",
                     help="give every tf.Session the NpuOptimizer, as the newest npu_bridge does at import")
    run.add_argument("--shadow-real-npu-bridge", action="store_true",
                     help="simulate even when a real npu_bridge is installed")
    run.add_argument("--tf2", action="store_true",
                     help="the script is written for TensorFlow 2: its `import tensorflow` gets the real module")
    run.add_argument("script", help="the Python script")
    run.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")
    run.set_defaults(handler=cmd_run)

    mixlist = commands.add_parser(
        "mixlist", help="show the list (white/black/gray) each op ends in, and the rule that put it there",
        description="Without OPs: the ops the --modify-mixlist file changes, or the built-in white and "
                    "black lists. OPs may be TensorFlow or Ascend IR op types (MatMul or MatMulV2).")
    mixlist.add_argument("ops", nargs="*", metavar="OP", help="op types to look up")
    mixlist.add_argument("--modify-mixlist", metavar="FILE", help="a modify_mixlist JSON file to apply")
    mixlist.add_argument("--ops-info", metavar="DIR", help="operator library folder (default: the built-in one)")
    mixlist.add_argument("--json", action="store_true", help="print JSON")
    mixlist.set_defaults(handler=cmd_mixlist)

    from npu_sim_bridge.cli.debug_commands import add_debug_commands

    add_debug_commands(commands)  # fusion-rules, compare, overflow

    from npu_sim_bridge.cli.launch import add_launch_command

    add_launch_command(commands)  # launch: N ranks of a script
    from npu_sim_bridge.cli.tool_commands import add_tool_commands

    add_tool_commands(commands)  # info, profile
    from npu_sim_bridge.cli.estimate_command import add_estimate_command

    add_estimate_command(commands)  # estimate: step time on an Ascend 910
    from npu_sim_bridge.cli.bisect_command import add_bisect_command

    add_bisect_command(commands)

    from npu_sim_bridge.cli.check import add_check_command

    add_check_command(commands)  # check: the npu_bridge and TF 1.15 APIs scripts use
    from npu_sim_bridge.cli.completion import add_completion_command

    add_completion_command(commands, parser)  # completion: a bash/zsh script generated from these parsers
    return parser


def _prepare(command: str) -> None:
    """Offline subcommands keep TensorFlow's start-up lines quiet (the process is ours); the others load the
    shim first (the console script skipped it at import, see npu_sim_bridge.__init__)."""
    if command in NO_TENSORFLOW_COMMANDS:
        return
    if command in OFFLINE_COMMANDS:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    elif os.environ.get("NPU_SIM_SKIP_NATIVE", "") not in ("1", "true", "yes"):
        from npu_sim_bridge import enable_sessions

        enable_sessions()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = "npu-sim"
    wants_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        command = f"npu-sim {args.command}"
        wants_json = bool(getattr(args, "json", False))
        if args.command not in NO_TENSORFLOW_COMMANDS:
            from npu_sim_bridge import TENSORFLOW_MISSING, TensorFlowMissingError, tensorflow_missing

            if tensorflow_missing():
                return report_error(command, TensorFlowMissingError(TENSORFLOW_MISSING), EXIT_FAILURE, wants_json)
        _prepare(args.command)
        return args.handler(args)
    except UsageError as err:
        return report_error(command, err, EXIT_USAGE, wants_json)
    except NpuSimError as err:
        return report_error(command, err, EXIT_FAILURE, wants_json)
    except OSError as err:  # a file the command reads or writes, outside what the library checks
        where = f" {err.filename!r}" if err.filename else ""
        return report_error(command, f"cannot use{where}: {err.strerror or err}", EXIT_FAILURE, wants_json)
    except KeyboardInterrupt:
        return report_error(command, "interrupted", EXIT_INTERRUPTED, wants_json)


if __name__ == "__main__":
    sys.exit(main())
