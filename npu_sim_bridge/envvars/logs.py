"""ASCEND_GLOBAL_LOG_LEVEL and ASCEND_SLOG_PRINT_TO_STDOUT onto the `npu_sim_bridge` logger.

CANN's levels: 0 debug, 1 info, 2 warning, 3 error, 4 null (nothing). With
ASCEND_SLOG_PRINT_TO_STDOUT=1 the records go to standard output, as CANN prints its logs there;
otherwise to a plog file, as CANN writes them: $ASCEND_PROCESS_LOG_PATH, else
~/ascend/log/debug/plog, file plog-<pid>_<time>.log. Without ASCEND_GLOBAL_LOG_LEVEL nothing is
configured (the logger follows the application's logging set-up), unless ASCEND_SLOG_PRINT_TO_STDOUT=1
asks for printing: then CANN's default level, 3 (error), applies. A log folder that cannot be made or
written is one warning, and the records go to standard error; a plog write that fails (a full disk) is
one line on standard error, and the plog is then left alone, never a traceback per record.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings

from npu_sim_bridge.graph.attr_names import ASCEND_ENV_MARK


LOGGER_NAME = "npu_sim_bridge"
DEFAULT_LEVEL = "3"  # error, CANN's default
LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR,
          "4": logging.CRITICAL + 10}
_FORMAT = "[%(levelname)s] NPU_SIM(%(process)d,%(processName)s):%(asctime)s [%(module)s] %(message)s"


class AscendEnvironmentWarning(UserWarning):
    """An Ascend logging variable that cannot be honoured (printed as one line, as this package's warnings are)."""


def apply_logging_environment(environ=None) -> logging.Handler | None:
    """Configure the npu_sim_bridge logger from the Ascend variables; returns the handler it added."""
    environ = os.environ if environ is None else environ
    to_stdout = environ.get("ASCEND_SLOG_PRINT_TO_STDOUT", "0").strip() == "1"
    raw = (environ.get("ASCEND_GLOBAL_LOG_LEVEL") or "").strip()
    if not raw:
        if not to_stdout:
            return None
        raw = DEFAULT_LEVEL  # printing asked for without a level: CANN's default level
    level = LEVELS.get(raw)
    if level is None:
        warnings.warn(f"environment variable ASCEND_GLOBAL_LOG_LEVEL={raw!r} is invalid and was ignored; it "
                      "should be one of 0 (debug), 1 (info), 2 (warning), 3 (error), 4 (null)", AscendEnvironmentWarning,
                      stacklevel=2)
        return None
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):  # one handler from the environment, even if applied twice
        if getattr(handler, ASCEND_ENV_MARK, False):
            logger.removeHandler(handler)
    logger.setLevel(level)
    if to_stdout:
        handler: logging.Handler = logging.StreamHandler(sys.stdout)
    else:
        path = _plog_path(environ)
        handler = _PlogHandler(path, delay=True, encoding="utf-8") if path else logging.StreamHandler(sys.stderr)
    setattr(handler, ASCEND_ENV_MARK, True)
    handler.setFormatter(logging.Formatter(_FORMAT))
    logger.addHandler(handler)
    logger.propagate = False  # the Ascend variables say where the records go
    return handler


def _plog_path(environ) -> str | None:
    """The plog file to write, or None (with a warning) when its folder cannot be made or written."""
    given = environ.get("ASCEND_PROCESS_LOG_PATH")
    directory = given or os.path.join(os.path.expanduser("~"), "ascend", "log", "debug", "plog")
    what = f"ASCEND_PROCESS_LOG_PATH={given!r}" if given else f"the plog folder {directory}"
    try:
        os.makedirs(directory, exist_ok=True)
        writable = os.access(directory, os.W_OK | os.X_OK)
        reason = "it is not writable"
    except OSError as error:
        writable, reason = False, error.strerror or str(error)
    if not writable:
        warnings.warn(f"{what} cannot be used ({reason}); the npu_sim_bridge log goes to standard error instead: "
                      "point ASCEND_PROCESS_LOG_PATH at a writable folder", AscendEnvironmentWarning, stacklevel=3)
        return None
    return os.path.join(directory, f"plog-{os.getpid()}_{time.strftime('%Y%m%d%H%M%S')}.log")


class _PlogHandler(logging.FileHandler):
    """A plog file whose first failed write (a full disk, a removed folder) is one line on stderr, after
    which the records are dropped: logging's default prints a traceback for every record."""

    failed = False

    def emit(self, record):
        if not self.failed:
            super().emit(record)

    def handleError(self, record):  # noqa: N802 - logging's name
        if self.failed:
            return
        self.failed = True
        error = sys.exc_info()[1]
        reason = getattr(error, "strerror", None) or str(error)
        try:
            sys.stderr.write(f"npu_sim_bridge: cannot write the log file {self.baseFilename} ({reason}); "
                             "further log records are dropped\n")
        except (OSError, ValueError):
            pass


def log_rewrite(report) -> None:
    """At INFO, what one rewrite did: each pass with its counters, the GeOps, the casts and dtype changes."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.isEnabledFor(logging.INFO):
        return
    summary = report.summary
    counts = summary["counts"] or {}
    logger.info("NpuOptimizer rewrote graph %s (item %s, role %s): %d nodes in the input graph, %d in the rewritten "
                "graph (%d GeOps holding %d nodes, %d host ops), %.1f ms", report.graph_id, report.item_id or "-",
                summary["role"] or "-", summary["nodes_before"], summary["nodes_after"], counts.get("geops", 0),
                counts.get("inside_geops", 0), counts.get("outside_geops", summary["nodes_after"]),
                report.seconds * 1000)
    for record in report.passes:
        stats = ", ".join(f"{key}={value}" for key, value in record.stats.items())
        logger.info("  pass %s: %s%s", record.name, "changed" if record.changed else "no change",
                    f" ({stats})" if stats else "")
    geops = summary["geops"]
    logger.info("  GeOps: %d%s", len(geops), f" ({', '.join(geops)})" if geops else "")
    logger.info("  casts added: %d; dtype changes: %d; lists: %s", _casts_added(report), summary["dtype_changes"],
                ", ".join(f"{k} {v}" for k, v in summary["lists"].items()) or "-")
    for text in report.warnings:
        logger.warning("  %s", text)


def _casts_added(report) -> int:
    for record in report.passes:
        if record.name == "precision":
            return int(record.stats.get("casts_inserted", 0)) + int(record.stats.get("round_trips", 0))
    return 0
