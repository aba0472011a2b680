"""npu-sim bisect end to end: a model whose MatMul overflows float16 next to a harmless MatMul.

1. under allow_mix_precision the model gives inf (the first MatMul's ~1e5 activations overflow float16);
2. bisect finds the culprit node and writes mixlist.json and mixlist.customize_dtypes.cfg;
3. a Session with modify_mixlist and customize_dtypes set to those files gives float32's numbers,
   and the harmless MatMul still runs in float16.
The same from the shell:  npu-sim bisect model.pb --fetch out --feed x=x.npy -o mixlist.json
Run:  python examples/bisect_overflow.py [--workdir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.bisect import bisect_graph  # noqa: E402
from npu_sim_bridge.bisect.output import customize_path  # noqa: E402

tf.compat.v1.disable_eager_execution()


def build_model():
    rs = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8, 64], name="x")
        big = tf.matmul(x, tf.constant(rs.uniform(400, 800, (64, 16)).astype(np.float32)), name="big/MatMul")
        small = tf.matmul(x, tf.constant(rs.normal(0, 0.1, (64, 16)).astype(np.float32)), name="small/MatMul")
        tf.reduce_sum(tf.multiply(big, 1e-3, name="big/scale") + small, axis=1, name="out")
    return graph


def run(graph, x, **options):
    """The model's output in a Session whose ConfigProto is built by hand, as migrated scripts build it."""
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    for key, value in options.items():
        custom_op.parameter_map[key].s = value.encode()
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        return sess.run("out:0", {"x:0": x})


def main(workdir):
    x = np.abs(np.random.RandomState(1).normal(3, 1, (8, 64))).astype(np.float32)
    graph = build_model()
    print("1. float32:           ", run(graph, x, precision_mode="allow_fp32_to_fp16")[:3])
    print("   allow_mix_precision:", run(graph, x, precision_mode="allow_mix_precision")[:3])
    mixlist = os.path.join(workdir, "mixlist.json")
    result = bisect_graph(graph.as_graph_def(), ["out"], feeds={"x:0": x}, output=mixlist,
                          workdir=os.path.join(workdir, "runs"))  # the runs' mixlists and dumps
    print("2.", result.to_text())
    fixed = run(graph, x, precision_mode="allow_mix_precision", modify_mixlist=mixlist,
                customize_dtypes=customize_path(mixlist))
    print("3. with the files:    ", fixed[:3])
    report = next(r for r in reversed(npu_sim_bridge.recent_reports()) if r.item_id == "tf_graph" and not r.rerun)
    for name in ("big/MatMul", "small/MatMul"):
        print(f"   {name} runs {report.nodes[name].dtype_after}")
    return result, fixed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="folder for the files bisect writes (default: a temporary one)")
    args = parser.parse_args()
    main(args.workdir or tempfile.mkdtemp(prefix="npu_sim_bisect_"))
