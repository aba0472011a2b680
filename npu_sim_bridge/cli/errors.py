"""How npu-sim ends on an error: exit statuses, and one line of text (or JSON with --json), never a traceback.

Exit status: 0 done; 1 the command failed (an invalid option value, graph or dump, a file that
cannot be written); 2 the command line is wrong (argparse's convention: an unknown or malformed
argument, a script that does not exist); 130 interrupted. The error is one line on stderr,
`npu-sim CMD: error: ...`; with --json it is JSON on stdout:
{"error": {"type": ..., "message": ..., "exit_status": ...}}.
"""

from __future__ import annotations

import argparse
import json
import sys

from npu_sim_bridge.errors import NpuSimError

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(NpuSimError):
    """The command line is wrong: a malformed or unknown argument."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are raised, so that main reports them as text or JSON with exit status 2."""

    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def finite_number(text: str) -> float:
    """argparse type: a finite number >= 0 (a tolerance); nan or inf would make every comparison pass or fail."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def step_number(text: str) -> int:
    """argparse type: a step number, an integer >= 0."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a step number (an integer >= 0)")
    return int(text)


def report_error(command: str, err, status: int, wants_json: bool) -> int:
    """Print `err` for `command` as text on stderr or as JSON on stdout; returns `status`."""
    if wants_json:
        kind = type(err).__name__ if isinstance(err, BaseException) else "OSError"
        sys.stdout.write(json.dumps({"error": {"type": kind, "message": str(err), "exit_status": status}}) + "\n")
    else:
        print(f"{command}: error: {err}", file=sys.stderr)
    return status
