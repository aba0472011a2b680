"""npu-sim's `estimate` subcommand (thin: parse arguments, call npu_sim_bridge.estimate)."""

from __future__ import annotations

import sys

from npu_sim_bridge.cli.params import parse_params


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
    from npu_sim_bridge.cli.errors import UsageError
    from npu_sim_bridge.estimate import estimate
    from npu_sim_bridge.estimate.output import to_csv, to_json, to_text
    from npu_sim_bridge.fileio import check_output_path, write_atomic

    if bool(args.graph) == bool(args.script):
        raise UsageError("give either GRAPH (a .pb/.pbtxt/.meta or SavedModel dir) or --script SCRIPT ARGS...")
    if args.script and args.fetch:
        raise UsageError("--fetch is for GRAPH; with --script the fetches are those of the script's training step")
    if args.csv:
        check_output_path(args.csv, "--csv")
    params = parse_params(args.param)
    graph, fetches = args.graph, args.fetch
    if args.script:
        graph, fetches, params = _from_script(args.script[0], args.script[1:], params)
    step = estimate(graph, params, batch=args.batch, soc=args.soc, fetches=fetches,
                    constants=_constants(args.constant))
    if args.csv:
        write_atomic(args.csv, to_csv(step), "op summary CSV")
    if args.report:
        from npu_sim_bridge.estimate.annotate import write_report

        written = write_report(step, args.report, step.graph_def)
        sys.stderr.write(f"npu-sim estimate: report with every node's estimated unit and time: {written[0]}\n")
    sys.stdout.write(to_json(step, args.top, args.all_ops) + "\n" if args.json else to_text(step, args.top))
    return 0


# Options whose effect is output files or instrumentation of the script's own run, not the estimated step.
_RUN_ONLY = ("sim_report_dir", "enable_dump", "enable_dump_debug", "dump_path", "profiling_mode",
             "profiling_options")


def _from_script(path: str, argv, params: dict):
    """The graph, fetches and options of the script's first training step (fed shapes set on its
    placeholders); --param values replace the Session's."""
    import os

    from npu_sim_bridge.cli.errors import UsageError
    from npu_sim_bridge.estimate.script import capture_training_step, with_fed_shapes

    if not os.path.isfile(path):
        raise UsageError(f"--script {path!r} does not exist or is not a file")
    if os.environ.get("NPU_SIM_SKIP_NATIVE", "") not in ("1", "true", "yes"):
        from npu_sim_bridge import enable_sessions

        enable_sessions()  # the script's Sessions name NpuOptimizer: Grappler must know it
    captured = capture_training_step(path, argv)
    if not captured.npu_optimizer:
        sys.stderr.write(f"npu-sim estimate: note: the training Session of {path} names no NpuOptimizer; "
                         "estimated with the default options and --param\n")
    options = {k: v for k, v in captured.options.items() if k not in _RUN_ONLY}
    options.update(params)
    return with_fed_shapes(captured.graph_def, captured.feed_shapes), captured.fetches, options


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
    import argparse

    from npu_sim_bridge.estimate.hardware import PRESETS

    parser = commands.add_parser(
        "estimate", help="estimate the step time the graph would take on an Ascend 910, per GeOp and op, "
                         "and name its bottlenecks",
        description="Rewrites GRAPH (or the first training step a TF1 script issues: --script SCRIPT ARGS...) as "
                    "NpuOptimizer would and costs every op the step runs on the SoC's cube, "
                    "vector unit, AI CPU or the host, plus host<->device copies and the per-run overhead. An "
                    "estimate from a roofline model calibrated on two measured throughputs, not a measurement.")
    parser.add_argument("graph", nargs="?", default=None,
                        help="a GraphDef (.pb/.pbtxt), MetaGraphDef (.meta) or SavedModel dir")
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
    parser.add_argument("--report", metavar="DIR",
                        help="also write the rewrite's report with every node's estimated unit and time "
                             "(npu_unit, npu_us; JSON, text, the graphs and the HTML picture) to DIR")
    parser.add_argument("--script", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                        help="instead of GRAPH: run the TF1 script as `npu-sim run` does, stop it when it issues "
                             "its first training step (before that step runs) and estimate that step's graph "
                             "with the shapes it feeds and its Session's options; goes last, everything after "
                             "it is the script's")
    parser.set_defaults(handler=cmd_estimate)
