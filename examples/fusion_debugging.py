"""Fusion-anomaly debugging (precision_tool's workflow, seed 004) end to end on a small CNN.

1. train with the fusion rules on, dumping every tensor (action "dump"); keep the dump as debug_1;
2. train with the fusion rules off (action "fusion_off|dump"), dump to debug_0;
3. compare the dumps (`npu-sim compare debug_0 debug_1`): the first divergent op is a fused op, and
   the dump says which rules made it;
4. switch off just that rule in FUSION_SWITCH_FILE (action "fusion_switch|dump") and train again;
5. compare with the fusion-off dump: the divergence is gone.
Under allow_mix_precision a fused MatMul+BiasAdd rounds to float16 once, after adding the bias, where
the unfused pair rounds the MatMul result first: that is the divergence found here.
Run:  python examples/fusion_debugging.py [--workdir DIR]   (or: npu-sim run examples/fusion_debugging.py, which
      builds tf.compat.v1.layers variables as TF1 reference variables)
"""

import argparse
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import npu_sim_bridge  # noqa: E402,F401  (registers NpuOptimizer)
from npu_sim_bridge.dumps import compare_dumps  # noqa: E402
from npu_sim_bridge.dumps.render import summary  # noqa: E402
from npu_sim_bridge.npu_init import npu_config_proto  # noqa: E402

tf.compat.v1.disable_eager_execution()
STEPS = 2


def build_model():
    """A small CNN: conv (bias, relu) -> dense (bias, relu) -> dense logits, trained with SGD."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(7)
        images = tf.compat.v1.placeholder(tf.float32, [8, 8, 8, 3], name="images")
        labels = tf.compat.v1.placeholder(tf.int64, [8], name="labels")
        conv = tf.compat.v1.layers.conv2d(images, 4, 3, padding="same", activation=tf.nn.relu, name="conv")
        flat = tf.reshape(conv, [8, 8 * 8 * 4])
        hidden = tf.compat.v1.layers.dense(flat, 32, activation=tf.nn.relu, name="hidden")
        logits = tf.compat.v1.layers.dense(hidden, 5, name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    rng = np.random.RandomState(0)
    feed = {images: rng.normal(size=(8, 8, 8, 3)).astype(np.float32) * 4, labels: rng.randint(0, 5, size=8)}
    return graph, init, train_op, loss, feed


def train(model, action, hand_built=False):
    """Train STEPS steps in a new Session configured by precision_tool's update_custom_op(action).

    hand_built: use the ConfigProto as built by hand (Grappler's remapper stays on, as in the seeds)
    instead of passing it through npu_config_proto (which turns remapping off).
    """
    import npu_sim_bridge.precision_tool.tf_config as npu_tf_config

    graph, init, train_op, loss, feed = model
    config = tf.compat.v1.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op = npu_tf_config.update_custom_op(custom_op, action=action)
    custom_op.parameter_map["dump_step"].s = b"0|1"
    with tf.compat.v1.Session(graph=graph, config=config if hand_built else npu_config_proto(config)) as sess:
        sess.run(init)
        losses = [sess.run([loss, train_op], feed)[0] for _ in range(STEPS)]
    return losses


def keep_dump(data_dir, name):
    """Move precision_data/npu/debug_0 aside (the seed's `mv debug_0 debug_1`)."""
    source = os.path.join(data_dir, "npu", "debug_0")
    target = os.path.join(data_dir, "npu", name)
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(source, target)
    return target


def fused_rules_of(result):
    """The rules that made the first divergent op, read from the dump under test (B)."""
    pair, row = result.first_divergent
    entry = next(e for e in pair.b.tensors if e["op"] == row.op and e["io"] == row.io and e["slot"] == row.slot)
    return row, entry.get("fusion", [])


def main(workdir, hand_built=False):
    data_dir = os.path.join(workdir, "precision_data")
    os.environ["NPU_SIM_PRECISION_DATA_DIR"] = data_dir
    os.environ.setdefault("NPU_SIM_CONFIG_DIR", os.path.join(workdir, "config"))
    import npu_sim_bridge.precision_tool.tf_config as npu_tf_config

    model = build_model()
    print("1. fusion on, dump       loss:", train(model, "dump", hand_built))
    fusion_on = keep_dump(data_dir, "debug_1")
    print("2. fusion off, dump      loss:", train(model, "fusion_off|dump", hand_built))
    fusion_off = keep_dump(data_dir, "debug_0_fusion_off")

    result = compare_dumps(fusion_off, fusion_on)
    print("3. compare fusion off (A) with fusion on (B):")
    print("\n".join("   " + line for line in summary(result)))
    if result.first_divergent is None:
        print("   no divergence: fusion is not the cause")
        return None, None
    row, rules = fused_rules_of(result)
    if not rules:
        print(f"   the first divergent op {row.op} ({row.type_b or row.type}) is not a fused op: fusion is not "
              "where the runs part; look at that op's inputs in the dumps")
        return result, None
    culprit = rules[0]
    print(f"   the first divergent op {row.op} is a {row.type_b} made by {', '.join(rules)}; switching off {culprit}")

    kind = "UBFusion" if culprit.startswith("Tbe") else "GraphFusion"
    with open(npu_tf_config.FUSION_SWITCH_FILE, "w", encoding="utf-8") as handle:
        handle.write('{"Switch": {"%s": {"%s": "off"}}}\n' % (kind, culprit))
    print("4. only", culprit, "off, dump loss:", train(model, "fusion_switch|dump", hand_built))
    switched = keep_dump(data_dir, "debug_2_switch")
    again = compare_dumps(fusion_off, switched)
    print(f"5. compare fusion off (A) with only {culprit} off (B):")
    print("\n".join("   " + line for line in summary(again)))
    return result, again


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="folder for precision_data and the switch file (default: a temporary one)")
    parser.add_argument("--hand-built-config", action="store_true",
                        help="keep the ConfigProto as built by hand (Grappler's remapper on), as the seeds do")
    args = parser.parse_args()
    main(args.workdir or tempfile.mkdtemp(prefix="npu_sim_fusion_"), hand_built=args.hand_built_config)
