"""npu-sim's precision-debugging subcommands (thin: parse arguments, call npu_sim_bridge.dumps / passes.fusion)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from npu_sim_bridge.cli.errors import UsageError, finite_number, step_number

DIVERGENCE_STATUS = 3   # npu-sim compare --fail-on-divergence: a divergent op was found (1: error, 2: usage)


def cmd_fusion_rules(args) -> int:
    from npu_sim_bridge.passes.fusion import describe_rules

    rows, warnings = describe_rules(args.fusion_switch_file)
    if args.json:
        sys.stdout.write(json.dumps({"rules": rows, "warnings": warnings}, indent=2) + "\n")
        return 0
    for text in warnings:
        print(f"npu-sim fusion-rules: warning: {text}", file=sys.stderr)
    header = ("rule", "kind", "pattern", "fused op", "state")
    table = [header] + [(r["name"], r["kind"], r["pattern"], r["fused_op"],
                         r["state"] + ("" if r["can_switch_off"] else " (cannot be switched off)")) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if args.fusion_switch_file:
        for row in rows:
            print(f"  {row['name']}: {row['why']}")
    return 0


def cmd_compare(args) -> int:
    from npu_sim_bridge.dumps import compare_dumps
    from npu_sim_bridge.dumps import render
    from npu_sim_bridge.fileio import check_output_path, write_atomic

    out_kind = None
    if args.out:
        check_output_path(args.out, "--out")
        out_kind = os.path.splitext(args.out)[1].lower()
        if out_kind not in (".csv", ".json"):
            raise UsageError(f"--out {args.out!r} must end in .csv or .json (the format follows "
                             "the extension)")
    show = args.progress if args.progress is not None else sys.stderr.isatty()

    def progress(total):
        return render.ProgressBar(total) if show and total >= args.progress_min else None

    steps = list(args.step) if args.step else None
    result = compare_dumps(args.dump_a, args.dump_b, atol=args.atol, rtol=args.rtol, steps=steps,
                           progress_factory=progress)
    failed = DIVERGENCE_STATUS if args.fail_on_divergence and result.first_divergent is not None else 0
    if args.json:
        for text in result.warnings:
            print(f"npu-sim compare: warning: {text}", file=sys.stderr)
        sys.stdout.write(render.to_json(result) + "\n")
        _write_outputs(args, result, out_kind, quiet=True)
        return failed
    if not args.quiet:
        sys.stdout.write(render.table(result.rows, None if args.max_rows < 0 else args.max_rows))
    for line in render.summary(result):
        print(line)
    _write_outputs(args, result, out_kind, quiet=False)
    return failed


def _write_outputs(args, result, out_kind, quiet: bool) -> None:
    from npu_sim_bridge.dumps import render
    from npu_sim_bridge.fileio import write_atomic

    stream = sys.stderr if quiet else sys.stdout  # under --json stdout holds the JSON alone
    if args.out:
        write_atomic(args.out, render.to_csv(result) if out_kind == ".csv" else render.to_json(result), "--out")
        print(f"wrote {args.out}", file=stream)
    if args.msaccucmp:
        from npu_sim_bridge.dumps.msaccucmp import write_result_csvs

        for path in write_result_csvs(result, args.msaccucmp):
            print(f"wrote {path}", file=stream)


def cmd_overflow(args) -> int:
    from npu_sim_bridge.dumps import read_overflow

    records = read_overflow(args.dump)
    if args.json:
        sys.stdout.write(json.dumps(records, indent=2) + "\n")
        return 0
    if not records:
        print("no float overflow was recorded (enable_dump_debug)")
    for record in records:
        first = record["first"]
        fused = f", fused by {' then '.join(first['fusion'])}" if first.get("fusion") else ""
        kind = f", {first['kind']}" if first.get("kind") else ""
        turn = f" in loop turn {first['turn']}" if first.get("turn") else ""
        inserted = (f"; inserted by the {first['inserted_by']} pass after {first['producer']}"
                    f"{':' + str(first['producer_slot']) if first.get('producer_slot') else ''} for "
                    f"{', '.join(first.get('consumers', [])) or 'its users'}" if first.get("inserted_by") else "")
        count = f", {first['count']} non-finite values" if first.get("count") else ""
        print(f"step {record['step']}: first overflowing op {first['op']} "
              f"({first['type']}, {first['dtype']}{fused}{kind}) output {first['slot']}{turn}{count}{inserted}; {len(record['ops'])} op output(s) overflowed  "
              f"[{record['graph']}]")
    return 0


def add_debug_commands(commands) -> None:
    rules = commands.add_parser("fusion-rules", help="list the simulated fusion rules and whether a switch file "
                                                     "leaves them on")
    rules.add_argument("--fusion-switch-file", metavar="FILE", help="a fusion_switch_file to apply")
    rules.add_argument("--json", action="store_true", help="print JSON")
    rules.set_defaults(handler=cmd_fusion_rules)

    compare = commands.add_parser(
        "compare", help="compare two dumps tensor by tensor and find the first divergent op",
        description="DUMP_A is the reference (e.g. fusion off), DUMP_B the dump under test. Each is a dump_path, "
                    "a run folder under it or one graph folder (holding manifest.json).")
    compare.add_argument("dump_a", metavar="DUMP_A")
    compare.add_argument("dump_b", metavar="DUMP_B")
    compare.add_argument("--out", metavar="FILE", help="also write every row to FILE (.csv or .json)")
    compare.add_argument("--msaccucmp", metavar="DIR", help="also write msaccucmp's result_*.csv files (its "
                                                             "columns and metrics) into DIR")
    compare.add_argument("--atol", type=finite_number, default=0.0, help="absolute tolerance (default 0: any difference)")
    compare.add_argument("--rtol", type=finite_number, default=0.0, help="tolerance relative to max|A| (default 0)")
    compare.add_argument("--step", action="append", type=step_number, metavar="N", help="compare only these steps")
    compare.add_argument("--max-rows", type=int, default=100, help="rows the table shows (-1: all)")
    compare.add_argument("--quiet", action="store_true", help="print the summary only")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON (rows, first divergent "
                                                             "op, skipped ops, warnings) instead of the table")
    compare.add_argument("--fail-on-divergence", action="store_true",
                         help=f"exit with status {DIVERGENCE_STATUS} when a divergent op is found (for scripts and CI)")
    compare.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="show a progress bar on stderr (default: when stderr is a terminal)")
    compare.add_argument("--progress-min", type=int, default=200, help=argparse.SUPPRESS)
    compare.set_defaults(handler=cmd_compare)

    overflow = commands.add_parser("overflow", help="the first op whose float16 output overflowed, per step "
                                                    "(a dump of a run with enable_dump_debug)")
    overflow.add_argument("dump", metavar="DUMP")
    overflow.add_argument("--json", action="store_true", help="print JSON")
    overflow.set_defaults(handler=cmd_overflow)
