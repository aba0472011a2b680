"""`npu-sim check PATH...`: print api_check's report (text or --json); exit status 1 when an API is missing."""

import json
import sys

from npu_sim_bridge.cli.errors import EXIT_FAILURE, UsageError

# The library (TensorFlow, the simulated modules) is imported when the command runs, so `npu-sim --help`
# and the offline commands stay free of TensorFlow.


def format_text(result, show_all=False):
    from npu_sim_bridge.tf1compat import resolve

    lines = []
    order = {status: index for index, status in enumerate(reversed(resolve.STATUSES))}
    for entry in sorted(result["apis"], key=lambda e: (order[e["status"]], e["api"])):
        if entry["status"] == resolve.PROVIDED and not entry["note"] and not show_all:
            continue
        where = ", ".join(entry["locations"][:3]) + (f" (+{len(entry['locations']) - 3} more)"
                                                     if len(entry["locations"]) > 3 else "")
        note = f"\n    {entry['note']}" if entry["note"] else ""
        lines.append(f"{entry['status']}: {entry['api']}  [{where}]{note}")
    for filename, why in result["unreadable"].items():
        lines.append(f"not read: {filename}: {why}")
    summary = result["summary"]
    files = f"{summary['files']} file{'s' if summary['files'] != 1 else ''}"
    lines.append(f"npu-sim check: {summary['apis']} APIs ({summary['uses']} uses) in {files}: "
                 + ", ".join(f"{summary[status]} {status}" for status in resolve.STATUSES))
    return "\n".join(lines) + "\n"


def cmd_check(args):
    """Print the report; exit status 1 when an API is missing or a file cannot be read, 2 for a bad path, else 0."""
    from npu_sim_bridge.api_check import CheckError, check
    from npu_sim_bridge.runtime import alias
    from npu_sim_bridge.tf1compat import resolve

    if args.modules:
        sys.stdout.write("\n".join(sorted(alias.MODULES)) + "\n")
        return 0
    try:
        result = check(args.paths)
    except CheckError as err:  # a path that does not exist: the command line is wrong (exit status 2)
        raise UsageError(str(err)) from None
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(format_text(result, show_all=args.all))
    return EXIT_FAILURE if result["summary"][resolve.MISSING] or result["unreadable"] else 0


def add_check_command(commands):
    parser = commands.add_parser(
        "check", help="list the npu_bridge and TensorFlow 1.15 APIs scripts use, and which `npu-sim run` lacks",
        description="Reads the Python files and classes every npu_bridge and TensorFlow 1.15 API they use as "
                    "provided, provided with a difference, accepted without effect, or missing, with file:line. "
                    "Of the files, only their import statements of TensorFlow, npu_bridge and TensorFlow's "
                    "companion packages run, each on its own, under the hooks `npu-sim run` uses; nothing else "
                    "runs. Exit status 1 when something is missing or a file does not parse (for CI).")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="Python files or project folders")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--all", action="store_true", help="also list the APIs provided as they are")
    parser.add_argument("--modules", action="store_true", help="list the npu_bridge modules simulated and exit")
    parser.set_defaults(handler=cmd_check)
