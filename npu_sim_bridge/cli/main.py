"""npu-sim: inspect and rewrite graphs offline with the NpuOptimizer pipeline."""

from __future__ import annotations

import argparse
import sys


def _parse_params(pairs: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"npu-sim: --param expects KEY=VALUE, got {pair!r}")
        params[key.strip()] = value
    return params


def _add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="a GraphDef (.pb/.pbtxt), MetaGraphDef (.meta) or SavedModel dir")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter_map option, e.g. precision_mode=allow_mix_precision")
    parser.add_argument("--fetch", action="append", default=None, metavar="NAME",
                        help="a tensor or node the caller fetches (default: the MetaGraph's train_op)")


def _rewrite(args):
    from npu_sim_bridge.api import rewrite

    return rewrite(args.graph, _parse_params(args.param), fetches=args.fetch)


def cmd_inspect(args) -> int:
    result = _rewrite(args)
    if args.json:
        sys.stdout.write(result.report.to_json() + "\n")
    else:
        sys.stdout.write(result.report.to_text(max_nodes=args.max_nodes))
    return 0


def cmd_rewrite(args) -> int:
    from google.protobuf import text_format

    result = _rewrite(args)
    if args.output.endswith((".pbtxt", ".txt")):
        data = text_format.MessageToString(result.graph_def).encode("utf-8")
    else:
        data = result.graph_def.SerializeToString()
    with open(args.output, "wb") as handle:
        handle.write(data)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as handle:
            handle.write(result.report.to_json())
    summary = result.report.summary
    print(f"wrote {args.output}: {summary['nodes_before']} nodes in, {summary['nodes_after']} out")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npu-sim", description="Simulate Ascend's NpuOptimizer graph rewrite on plain TensorFlow.")
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
    rewrite.set_defaults(handler=cmd_rewrite)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from npu_sim_bridge.errors import NpuSimError

    try:
        return args.handler(args)
    except NpuSimError as err:
        print(f"npu-sim {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
