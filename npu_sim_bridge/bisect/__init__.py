"""npu-sim bisect: find the ops whose float16 breaks a model and write the modify_mixlist that fixes it.

search.py        smallest fixing subset by adaptive group testing (k·log n trials)
outcome.py       a run's values and decisions, a candidate fix, a trial, the error measure
guidance.py      orders candidates from the dumps (overflow flags, first divergent op)
driver.py        the steps: float32 reference, mixed run, type search, node search
graph_target.py  runs a graph file offline;  script_target.py  runs a training script
output.py        the modify_mixlist JSON and the customize_dtypes file;  result.py  the report
"""

from __future__ import annotations

import shutil

from npu_sim_bridge.bisect.driver import Bisector, write_outputs
from npu_sim_bridge.bisect.outcome import BisectError
from npu_sim_bridge.bisect.result import BisectResult

__all__ = ["BisectError", "BisectResult", "Bisector", "bisect_graph", "bisect_script", "write_outputs"]


def bisect_graph(graph, fetches, feeds=None, params=None, rtol=1e-2, output=None, guided=True,
                 progress="stderr", workdir=None) -> BisectResult:
    """Bisect a graph (GraphDef, MetaGraphDef, tf.Graph or a .pb/.pbtxt/.meta/SavedModel path).

    feeds: {tensor name: array}; params: parameter_map options of the mixed runs (precision_mode,
    fusion_switch_file, ...); output: where to write the mixlist (and its customize_dtypes file);
    workdir: the folder for the runs' mixlists and dumps (created if missing; default a new temporary one).
    """
    from npu_sim_bridge.bisect.graph_target import GraphTarget

    target = GraphTarget(graph, fetches, feeds=feeds, params=params)
    return _bisect(target, params, rtol, output, guided, progress, workdir)


def bisect_script(script, args=(), metric=r"loss[ =:]+([-+0-9.eEnaifNAIF]+)", steps=None, params=None, rtol=1e-2,
                  output=None, guided=True, progress="stderr", timeout=None, workdir=None) -> BisectResult:
    """Bisect a training script run as `npu-sim run` does; `metric` is a regex whose group 1 is the number."""
    from npu_sim_bridge.bisect.script_target import ScriptTarget

    target = ScriptTarget(script, args, metric=metric, steps=steps, params=params, timeout=timeout)
    return _bisect(target, params, rtol, output, guided, progress, workdir)


def _bisect(target, params, rtol, output, guided, progress, workdir):
    from npu_sim_bridge.bisect.driver import stderr_progress

    report = stderr_progress if progress == "stderr" else progress
    bisector = Bisector(target, params=params, rtol=rtol, guided=guided, progress=report, workdir=workdir)
    try:
        result = bisector.run()
    except BaseException:  # an error, Ctrl-C: the temporary folder made for this bisect holds nothing worth keeping
        if not workdir:
            shutil.rmtree(bisector.workdir, ignore_errors=True)
        raise
    if output and result.found:
        write_outputs(result, output)
    return result
