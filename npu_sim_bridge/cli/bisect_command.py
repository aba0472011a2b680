"""npu-sim bisect: find the ops to keep in float32 for a graph file or a training script (thin: parse, call, print)."""

from __future__ import annotations

import argparse
import os
import sys

from npu_sim_bridge.cli.errors import UsageError
from npu_sim_bridge.cli.params import parse_params
from npu_sim_bridge.fileio import check_output_path, write_atomic

SEPARATOR = "--script-args"
_SCRIPT_OPTIONS = {"--metric": "metric", "--steps": "steps", "--rtol": "rtol", "-o": "output", "--output": "output",
                   "--param": "param", "--report": "report", "--timeout": "timeout", "--workdir": "workdir"}

_SCRIPT_FLAGS = {"--no-guide": "no_guide", "--json": "json"}


def _split_script_args(args) -> None:
    """Take bisect's own options out of what follows --script; everything after `--script-args` is the script's.

    (A plain `--` cannot be the separator: argparse's top-level parser consumes it before the subcommand.)"""
    if not args.script:
        return
    rest, script_args = list(args.script[1:]), []
    while rest:
        item = rest.pop(0)
        if item == SEPARATOR:
            script_args.extend(rest)
            break
        key, eq, value = item.partition("=")
        if key in _SCRIPT_OPTIONS or item in _SCRIPT_FLAGS:
            if item in _SCRIPT_FLAGS:
                setattr(args, _SCRIPT_FLAGS[item], True)
                continue
            if not eq:
                if not rest:
                    raise UsageError(f"{key} needs a value")
                value = rest.pop(0)
            name = _SCRIPT_OPTIONS[key]
            if name == "param":
                args.param.append(value)
            else:
                setattr(args, name, value)
            continue
        script_args.append(item)
    args.script, args.script_args = args.script[0], script_args


def _number(option, text, kind):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise UsageError(f"{option} {text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if not 0 < value < float("inf"):
        raise UsageError(f"{option} {text!r} must be a positive finite number")
    return value


def cmd_bisect(args) -> int:
    from npu_sim_bridge.bisect import bisect_graph, bisect_script
    from npu_sim_bridge.bisect.graph_target import load_feeds

    _split_script_args(args)
    if bool(args.graph) == bool(args.script):
        raise UsageError("give either GRAPH (with --fetch) or --script SCRIPT ARGS... (with --metric)")
    if not args.output:
        raise UsageError("name the mixlist to write with -o FILE.json")
    if args.script and not os.path.isfile(args.script):
        raise UsageError(f"--script {args.script!r} does not exist or is not a file")
    check_output_path(args.output, "-o")  # before the runs: a wrong path costs no work
    if args.report:
        check_output_path(args.report, "--report")
    params = parse_params(args.param)
    rtol = _number("--rtol", args.rtol, float)
    steps = _number("--steps", args.steps, int) if args.steps is not None else None
    timeout = _number("--timeout", args.timeout, float) if args.timeout else None
    if args.graph:
        result = bisect_graph(args.graph, args.fetch, feeds=load_feeds(args.feed), params=params, rtol=rtol,
                              output=args.output, guided=not args.no_guide, workdir=args.workdir)
    else:
        result = bisect_script(args.script, args.script_args, metric=args.metric,
                               steps=steps, params=params, rtol=rtol, output=args.output, guided=not args.no_guide,
                               timeout=timeout, workdir=args.workdir)
    if args.report:
        write_atomic(args.report, result.to_json(), "--report")
    written = {}
    if result.found:
        from npu_sim_bridge.bisect.output import customize_path

        written["modify_mixlist"] = args.output
        if result.fix.nodes:
            written["customize_dtypes"] = customize_path(args.output)
    if args.json:  # the report (every trial) and the files to set as options, one JSON object on stdout
        import json

        sys.stdout.write(json.dumps({**result.to_dict(), "written": written}, indent=2) + "\n")
        return 0
    sys.stdout.write(result.to_text())
    if "modify_mixlist" in written:
        print(f"wrote {written['modify_mixlist']}: set modify_mixlist to it")
    if "customize_dtypes" in written:
        print(f"wrote {written['customize_dtypes']}: set customize_dtypes to it (single nodes kept float32)")
    return 0


def add_bisect_command(commands) -> None:
    bisect = commands.add_parser(
        "bisect", help="find the ops whose float16 breaks a model and write a modify_mixlist that fixes it",
        description="Compares the model in float32 (allow_fp32_to_fp16: float16 only where the NPU has no float32 "
                    "kernel) with the mixed run (precision_mode, default allow_mix_precision), then searches the op "
                    "types, and the nodes of a culprit type, to keep in float32. Writes -o FILE.json (black-list "
                    "to-add op types) and, when single nodes are enough, FILE.customize_dtypes.cfg. "
                    "With --script, bisect's own options may follow the script's arguments; a script argument of "
                    "the same name goes after --script-args, which passes everything after it to the script.")
    bisect.add_argument("graph", nargs="?", help="a GraphDef (.pb/.pbtxt), MetaGraphDef (.meta) or SavedModel dir")
    bisect.add_argument("--fetch", action="append", default=[], metavar="NAME", help="tensor to compare (repeatable)")
    bisect.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy", help="a placeholder's value")
    bisect.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the mixed runs, e.g. precision_mode=allow_mix_precision")
    bisect.add_argument("--rtol", default="0.01", help="largest acceptable max|mixed-float32|/max|float32| (0.01)")
    bisect.add_argument("-o", "--output", metavar="FILE.json", help="the modify_mixlist file to write")
    bisect.add_argument("--report", metavar="FILE.json", help="also write the report (every trial) as JSON")
    bisect.add_argument("--no-guide", action="store_true", help="do not order candidates by the dump compare")
    bisect.add_argument("--json", action="store_true",
                        help="print the report (every trial) and the files written (\"written\") as JSON")
    bisect.add_argument("--workdir", metavar="DIR",
                        help="where the runs' mixlists and dumps go (kept; default: a new temporary folder)")
    bisect.add_argument("--metric", metavar="REGEX", help="with --script: regex whose group 1 is the number to compare")
    bisect.add_argument("--steps", metavar="N", help="with --script: stop the script after N metric lines")
    bisect.add_argument("--timeout", metavar="SECONDS", help="with --script: longest a run may take")
    bisect.add_argument("--script", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                        help="bisect a training script run as `npu-sim run` runs it")
    bisect.set_defaults(handler=cmd_bisect, script_args=[])
