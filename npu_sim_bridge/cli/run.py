"""`npu-sim run`: run a script as `python script.py args` would, with the npu_bridge alias and TensorFlow 1.15's API."""

import contextlib
import os
import runpy
import sys
import traceback

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.runtime.alias import NpuBridgeAliasError, install_alias
from npu_sim_bridge.runtime.child_alias import for_children, restore
from npu_sim_bridge.runtime.hccl.ranktable import RankConfigError
from npu_sim_bridge.runtime.loss_scale import register_tf1_contrib
from npu_sim_bridge.tf1compat.hook import tf1_api
from npu_sim_bridge.tf1compat.plumbing import PLUMBING_FILES


def run_script(path, argv=(), shadow=False, alias=True, tf1=False):
    """Run a Python script as `python path argv...` would, with the npu_bridge alias installed.

    The script's folder is sys.path[0], its __name__ is "__main__", sys.argv is [path, *argv];
    sys.argv and sys.path are restored afterwards. Exceptions and SystemExit from the script
    propagate (so tracebacks point at its lines). Returns the script's globals. The alias stays
    installed afterwards; uninstall_alias() removes it. alias=False runs without it.
    tf1=True (what `npu-sim run` does): the script's own `import tensorflow` gives TensorFlow 1.15's
    API while it runs, and TensorFlow's v2 behaviour is turned off for the process (tf1compat).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NpuBridgeAliasError(f"script {path!r} does not exist or is not a file")
    if tf1:
        register_tf1_contrib()
    if alias:
        install_alias(shadow=shadow)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *argv]
    script_dir = os.path.dirname(os.path.abspath(path))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.append(script_dir)
    try:
        with tf1_api(path) if tf1 else contextlib.nullcontext():
            return runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def print_script_traceback(error, path, file=None):
    """Print `error`'s traceback from the script's first frame on, as `python path` prints it.

    Frames of the TF1 import plumbing (tf1compat) that end the traceback are left out, as
    Python leaves out its own import machinery.
    """
    target = os.path.abspath(path)
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    report = traceback.TracebackException(type(error), error, tb or error.__traceback__)
    frames = list(report.stack)
    while len(frames) > 1 and os.path.realpath(frames[-1].filename) in PLUMBING_FILES:
        frames.pop()
    report.stack = traceback.StackSummary.from_list(frames)
    print("".join(report.format()), end="", file=file or sys.stderr)


def run_command(path, argv=(), shadow=False, all_sessions=False, tf1=True):
    """`npu-sim run`: run_script (TF1 API on unless tf1=False), then the exit status `python path argv...` would give.

    With tf1=True TensorFlow's v2 behaviour is off for the rest of the process (a command's process
    ends with the script; an in-process caller that must keep TensorFlow 2 behaviour passes tf1=False).

    An exception from the script is printed as Python prints it (traceback from the script's
    frames) and gives status 1; SystemExit from the script propagates. NpuBridgeAliasError (alias
    refused, script missing) propagates for the caller to report. When the script ends, stderr gets one
    line per graph the NpuOptimizer rewrote (report/summary.py: role, GeOps and host ops, float16 share,
    where its files went); when no graph went through it, a note says so and how to get the newest
    adapter's every-Session behaviour.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NpuBridgeAliasError(f"script {path!r} does not exist or is not a file")
    install_alias(shadow=shadow)
    saved_environment = for_children(shadow)  # the script's Python child processes import the alias too
    if all_sessions:
        from npu_sim_bridge.runtime.session import enable_npu_for_all_sessions

        enable_npu_for_all_sessions()
    option_error = False
    from npu_sim_bridge.report import recent_reports

    earlier = {id(report) for report in recent_reports()}
    try:
        run_script(path, argv, shadow=shadow, tf1=tf1)
    except RankConfigError as error:  # the rank environment, not the script: one line says what to change
        option_error = True
        print(f"npu-sim run: error: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # noqa: BLE001 - the script's own error, reported as `python script.py` would
        option_error = isinstance(error, NpuSimError)
        from npu_sim_bridge.passes.dump.npy_graph import write_failure

        failed_write = write_failure(error)
        if failed_write:  # a dump file the disk could not take: the line names it and what to do
            print(f"npu-sim run: error: {failed_write}", file=sys.stderr)
            return 1
        print_script_traceback(error, path)
        return 1
    finally:
        restore(saved_environment)
        _print_summaries(earlier)
        if not option_error:  # the error already says why nothing was rewritten
            _note_if_nothing_simulated(all_sessions)
    return 0


def _print_summaries(earlier):
    """One line per graph the run's Sessions rewrote (report/summary.py), on stderr, unless NPU_SIM_SUMMARY
    printed it already; offline rewrites the script or the profiler's estimate made (item "offline") get none."""
    from npu_sim_bridge.report import recent_reports, summary

    for report in recent_reports():
        if (id(report) not in earlier and not report.rerun and report.item_id != "offline"
                and not summary.summarized(report)):
            summary.print_line(report)


def _note_if_nothing_simulated(all_sessions):
    from npu_sim_bridge.native.entry import recent_failures
    from npu_sim_bridge.report import recent_reports

    if recent_reports() or recent_failures():
        return
    hint = "" if all_sessions else ("; the newest npu_bridge adds the NpuOptimizer to every Session, "
                                    "rerun with `npu-sim run --all-sessions` to do the same")
    print(f"npu-sim run: note: no graph of this run went through the NpuOptimizer (no Session named it){hint}",
          file=sys.stderr)
