"""The files the bad-input table (bad_inputs.json) names as {m}/...: graphs, option files and dumps, good and broken."""

import json
import os

import numpy as np
import tensorflow as tf

from npu_sim_bridge.passes.dump import layout


def small_graph(big_constant=False):
    """x -> MatMul(w) -> Relu h -> + 1 -> y: seven nodes, float32 (with a 64 KiB constant when asked)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        w = tf.constant(np.full((2, 2), 1.5, np.float32), name="w")
        h = tf.nn.relu(tf.matmul(x, w), name="h")
        y = tf.identity(h + 1.0, name="y")
        if big_constant:
            tf.identity(tf.constant(np.ones(16384, np.float32)) * 2.0, name="big")
    return graph, y


def tiny_graph():
    """x -> y: two nodes, under Grappler's 4-node minimum."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        y = tf.identity(x, name="y")
    return graph, y


def _write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as handle:
        handle.write(data)


def _graphs(folder):
    graph_def = small_graph()[0].as_graph_def()
    _write(os.path.join(folder, "graph.pb"), graph_def.SerializeToString())
    _write(os.path.join(folder, "graph.pbtxt"), str(graph_def))
    _write(os.path.join(folder, "big_graph.pb"), small_graph(big_constant=True)[0].as_graph_def().SerializeToString())
    cut = tf.compat.v1.GraphDef(node=graph_def.node[:4])  # what a copy stopped between two nodes leaves
    _write(os.path.join(folder, "trunc_node.pb"), cut.SerializeToString())
    data = graph_def.SerializeToString()
    _write(os.path.join(folder, "trunc_mid.pb"), data[:len(data) // 2 + 3])
    _write(os.path.join(folder, "empty.pb"), b"")
    _write(os.path.join(folder, "notgraph.pb"), "this is a text file, not a graph\n" * 4)
    _write(os.path.join(folder, "bad.pbtxt"), "node { name: 'a' op: \n")
    dangling = tf.compat.v1.GraphDef(node=[graph_def.node[i] for i in (0, 2, 3)], versions=graph_def.versions)
    _write(os.path.join(folder, "dangling.pb"), dangling.SerializeToString())
    duplicate = tf.compat.v1.GraphDef(node=list(graph_def.node) + [graph_def.node[0]], versions=graph_def.versions)
    _write(os.path.join(folder, "duplicate.pb"), duplicate.SerializeToString())


def _option_files(folder):
    unknown = [f"NoSuchOp{i}" for i in range(20000)]
    mixlists = {
        "ok": '{"black-list": {"to-add": ["Relu"]}}',
        "trailing_comma": '{"black-list": {"to-add": ["Relu",],},}',
        "comments": '// mine\n{"white-list": {"to-remove": ["MatMul"]} /* gray */}',
        "unknown_20000": json.dumps({"black-list": {"to-add": unknown}}),
        "unknown_one": '{"black-list": {"to-add": ["Rleu"]}}',
        "big": '{"black-list": {"to-add": [' + ",".join(['"NoSuchOpName"'] * 330000) + "]}}",
        "deep": "[" * 5000 + "]" * 5000,
        "invalid": '{"black-list": {"to-add": ["Relu" "Exp"]}}',
        "duplicate_key": '{"black-list": {}, "black-list": {}}',
        "unknown_section": '{"grey-list": {"to-add": ["Relu"]}}',
        "not_object": '["Relu"]',
        "comment_open": '{"black-list": {} /* open',
        "binary": b"\xff\xfe\x00garbage",
        "empty": "",
        "both_lists": '{"black-list": {"to-add": ["Relu"]}, "white-list": {"to-add": ["Relu"]}}',
    }
    for name, text in mixlists.items():
        _write(os.path.join(folder, f"mixlist_{name}.json"), text)
    switches = {
        "ok": '{"Switch": {"GraphFusion": {"ALL": "off"}}}',
        "trailing_comma": '{"Switch": {"GraphFusion": {"ALL": "off",},},}',
        "unknown_20000": json.dumps({"Switch": {"GraphFusion": {name: "off" for name in unknown}}}),
        "unknown_one": '{"Switch": {"GraphFusion": {"MatMulBiasAddFusionPas": "off"}}}',
        "big": '{"Switch": {"GraphFusion": {' + ",".join(f'"R{i}": "on"' for i in range(400000)) + "}}}",
        "deep": '{"Switch": ' + "[" * 5000 + "]" * 5000 + "}",
        "invalid": '{"Switch": {"GraphFusion": {"ALL": off}}}',
        "bad_value": '{"Switch": {"GraphFusion": {"ALL": "maybe"}}}',
        "no_switch": '{"GraphFusion": {"ALL": "off"}}',
        "duplicate_key": '{"Switch": {"GraphFusion": {"ALL": "off", "ALL": "on"}}}',
    }
    for name, text in switches.items():
        _write(os.path.join(folder, f"switch_{name}.json"), text)
    broken_ops = os.path.join(folder, "broken_ops")
    os.makedirs(broken_ops)
    _write(os.path.join(os.fsencode(broken_ops), b"ops_\xff.json"), b"{ not json")


def _dump(folder, values, steps=(0,), overflow=None):
    nodes = {"x": "Placeholder", "mm": "MatMul", "relu": "Relu"}
    entries = []
    for order, (op, array) in enumerate(values.items()):
        entry = {"op": op, "type": nodes[op], "order": order, "io": "output", "slot": 0, "dtype": "float32",
                 "file": layout.stem(order, "output", 0) + ".npy", "fusion": [], "fused_from": []}
        entries.append(entry)
        for step in steps:
            path = os.path.join(folder, layout.DUMP_DIR, f"{layout.STEP_PREFIX}{step}")
            os.makedirs(path, exist_ok=True)
            if array is None:
                _write(os.path.join(path, entry["file"]), b"")  # what a full disk leaves
            else:
                np.save(os.path.join(path, entry["file"]), array)
    regions = {}
    if overflow is not None:
        regions["GeOp1_0"] = entries
        path = os.path.join(folder, layout.OVERFLOW_DIR, f"{layout.STEP_PREFIX}0")
        os.makedirs(path)
        _write(os.path.join(path, entries[-1]["file"]), overflow)  # the count of a flagged output
    os.makedirs(folder, exist_ok=True)
    layout.write_manifest(folder, {"format": layout.FORMAT, "graph_id": "graph_1",
                                   "source_graph": {"fingerprint": str(sorted(nodes.items())), "nodes": nodes},
                                   "tensors": entries, "overflow": regions})


def _dumps(folder):
    base = np.arange(4, dtype=np.float32).reshape(2, 2)
    _dump(os.path.join(folder, "dump_a"), {"mm": base, "relu": base})
    _dump(os.path.join(folder, "dump_b"), {"mm": base, "relu": base + 0.5})
    _dump(os.path.join(folder, "dump_empty_npy"), {"mm": base, "relu": None})
    _dump(os.path.join(folder, "dump_cut_npy"), {"mm": base, "relu": base})
    cut = os.path.join(folder, "dump_cut_npy", layout.DUMP_DIR, f"{layout.STEP_PREFIX}0",
                       layout.stem(1, "output", 0) + ".npy")
    os.truncate(cut, os.path.getsize(cut) - 4)  # what a write stopped by a full disk leaves
    _dump(os.path.join(folder, "dump_shape"), {"mm": base, "relu": base.reshape(4)})
    with_nan = base.copy()
    with_nan[0, 1] = np.nan
    _dump(os.path.join(folder, "dump_nan"), {"mm": base, "relu": with_nan})
    _dump(os.path.join(folder, "dump_empty_flags"), {"mm": base, "relu": base}, overflow=b"")
    _dump(os.path.join(folder, "dump_cut_manifest"), {"mm": base, "relu": base})
    manifest = os.path.join(folder, "dump_cut_manifest", layout.MANIFEST)
    with open(manifest, "rb") as handle:
        data = handle.read()
    _write(manifest, data[:len(data) // 2])
    _dump(os.path.join(folder, "dump_no_records"), {"mm": base, "relu": base})
    _write(os.path.join(folder, "dump_no_records", layout.MANIFEST), json.dumps({"format": layout.FORMAT}))


def _scripts(folder):
    """Scripts for `npu-sim check`: one expression too deep for Python's parser, one it parses but deep to walk."""
    _write(os.path.join(folder, "check_30000_terms.py"),
           "import tensorflow as tf\nx = " + " + ".join(["1"] * 30000) + "\n")
    _write(os.path.join(folder, "check_2500_calls.py"),
           "import tensorflow as tf\nx = " + " + ".join(["tf.constant(1)"] * 2500) + "\n")


def make_materials(folder):
    """Write every file the table names under `folder`."""
    _scripts(folder)
    _graphs(folder)
    _option_files(folder)
    _dumps(folder)
