"""Estimates the step time a rewritten graph would take on an Ascend 910, per GeOp and per op, with an advisor.

hardware.py  the one table of constants (datasheet, derived, fitted, default) and the SoC presets
shapes.py    static shapes: the batch given to placeholders, TensorFlow's shape inference on import
dtypes.py    bytes per element of the dtypes the device holds
ops.py       an op's unit (cube, vector, AI CPU, host) and its FLOPs and bytes from shapes
walk.py      the nodes one step runs, each GeOp's body and the functions it calls
timing.py    an op's time: roofline at the unit's efficiency plus a fixed task cost; host-link copies
step.py      one step: GeOps, host ops, boundary copies, run overhead amortised by iterations_per_loop
advisor.py   the bottlenecks, their share of the step and what to do
output.py    text, JSON and op_summary-style CSV
calibrate.py fitting cube_efficiency and vector_traffic to the two measured throughputs
api.py       estimate(graph, options, batch, soc)
script.py    a TF1 script's first training step (graph, fetches, fed shapes, options), caught as it is issued
annotate.py  every node's estimated unit and time in the rewrite's report, and the report files with them
sweep.py     the model sweep at its usual training sizes and batches, with published 910 figures
"""


def estimate(*args, **kwargs):
    """npu_sim_bridge.estimate.api.estimate (imported on first call: the package imports no TensorFlow)."""
    from npu_sim_bridge.estimate.api import estimate as run

    return run(*args, **kwargs)
