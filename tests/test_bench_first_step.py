"""benchmarks/bench_first_step.py --grappler: the meta optimizer's log is read into milliseconds per optimizer,
for the training step's graph only (the initializer's run before it is dropped), GeOp bodies apart."""

from script_modules import load_script

LOG = """\
2026-11-29 02:20:40.1 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] model_pruner: Graph size after: 9 nodes (-1), 9 edges (0), time = 50.0ms.
BENCH_FIRST_STEP_COUNTED
2026-11-29 02:20:41.1 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:810] Starting optimization for grappler item: tf_graph
2026-11-29 02:20:41.2 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] remapper: Graph size after: 31 nodes (0), 30 edges (0), time = 7.0ms.
2026-11-29 02:20:41.3 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:810] Starting optimization for grappler item: tf_graph
2026-11-29 02:20:41.4 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] remapper: Graph size after: 371 nodes (-5), 867 edges (-5), time = 64.623ms.
2026-11-29 02:20:41.5 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] NpuOptimizer: Graph size after: 36 nodes (-255), 36 edges (-552), time = 184.798ms.
2026-11-29 02:20:41.6 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] remapper: Graph size after: 36 nodes (0), 35 edges (0), time = 2.0ms.
2026-11-29 02:20:41.7 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] tfg_optimizer{any(tfg-consolidate-attrs,tfg-toposort)}: Graph size after: 36 nodes (0), 35 edges (0), time = 3.5ms.
2026-11-29 02:20:41.8 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:810] Starting optimization for grappler item: GeOp2_0
2026-11-29 02:20:41.9 I tensorflow/core/grappler/optimizers/meta_optimizer.cc:967] constant_folding: Graph size after: 320 nodes (-1), 582 edges (-1), time = 31.853ms.
"""


def test_the_log_gives_each_optimizers_time_on_the_training_graph_and_the_geop_bodies():
    bench = load_script("benchmarks/bench_first_step.py")
    times = bench.parse_grappler_log(LOG)
    assert times == {("main graph", "remapper"): 64.623 + 2.0, ("main graph", "NpuOptimizer"): 184.798,
                     ("main graph", "tfg_optimizer"): 3.5, ("GeOp bodies", "constant_folding"): 31.853}
