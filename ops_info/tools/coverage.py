"""Builds ResNet-50, BERT-like and LSTM training graphs (TF1 graph mode) and checks each op type resolves."""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("NPU_SIM_SKIP_NATIVE", "1")  # only the op library is needed, not the Grappler shim

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)

_FLOAT_DTYPES = frozenset(("float16", "float32", "float64", "bfloat16"))


def _tf():
    import tensorflow as tf  # imported lazily: building graphs is the slow part

    tf.get_logger().setLevel("ERROR")
    tf.compat.v1.disable_eager_execution()
    return tf


def build_resnet50(tf):
    """ResNet-50 (tf.keras.applications, no weights) + softmax cross-entropy + MomentumOptimizer."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        model = tf.keras.applications.ResNet50(weights=None)
        labels = v1.placeholder(tf.float32, [None, 1000], name="labels")
        loss = tf.reduce_mean(tf.keras.losses.categorical_crossentropy(labels, model.outputs[0]))
        train_op = v1.train.MomentumOptimizer(0.1, 0.9).minimize(
            loss, global_step=v1.train.get_or_create_global_step())
        tf.group(train_op, *model.updates, name="train")
    return graph


def _dense(tf, x, units, name, activation=None):
    layer = tf.keras.layers.Dense(units, activation=activation, name=name)
    return layer(x)


def _manual_attention(tf, x, mask_add, hidden, heads, seq, name):
    head = hidden // heads
    q = _dense(tf, x, hidden, name + "_q")
    k = _dense(tf, x, hidden, name + "_k")
    v = _dense(tf, x, hidden, name + "_v")

    def split(t):
        t = tf.reshape(t, [-1, seq, heads, head])
        return tf.transpose(t, [0, 2, 1, 3])

    q, k, v = split(q), split(k), split(v)
    scores = tf.matmul(q, k, transpose_b=True) * (1.0 / float(head) ** 0.5)
    scores += mask_add
    probs = tf.nn.softmax(scores)
    probs = tf.compat.v1.nn.dropout(probs, rate=0.1)
    ctx = tf.matmul(probs, v)
    ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [-1, seq, hidden])
    return _dense(tf, ctx, hidden, name + "_out")


def build_bert(tf, layers=12, hidden=768, heads=12, inter=3072, seq=128, vocab=30522):
    """BERT-base-like encoder: embeddings, attention (manual and keras MultiHeadAttention), LayerNorm, gelu, Adam."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = v1.placeholder(tf.int32, [None, seq], name="input_ids")
        segs = v1.placeholder(tf.int32, [None, seq], name="segment_ids")
        mask = v1.placeholder(tf.int32, [None, seq], name="input_mask")
        labels = v1.placeholder(tf.int32, [None], name="labels")
        word = tf.keras.layers.Embedding(vocab, hidden, name="word_embeddings")(ids)
        pos_table = v1.get_variable("position_embeddings", [512, hidden])
        pos = tf.slice(pos_table, [0, 0], [seq, -1])
        seg_table = v1.get_variable("token_type_embeddings", [2, hidden])
        seg = tf.reshape(tf.matmul(tf.one_hot(tf.reshape(segs, [-1]), 2), seg_table), [-1, seq, hidden])
        x = word + seg + tf.expand_dims(pos, 0)
        x = tf.keras.layers.LayerNormalization(epsilon=1e-12, name="emb_ln")(x)
        x = tf.keras.layers.Dropout(0.1)(x)
        mask_f = tf.cast(tf.reshape(mask, [-1, 1, 1, seq]), tf.float32)
        mask_add = (1.0 - mask_f) * -10000.0
        for i in range(layers):
            name = "layer_%d" % i
            if i % 2 == 0:
                att = _manual_attention(tf, x, mask_add, hidden, heads, seq, name + "_att")
            else:
                mha = tf.keras.layers.MultiHeadAttention(heads, hidden // heads, dropout=0.1, name=name + "_mha")
                att = mha(x, x, attention_mask=tf.cast(tf.reshape(mask, [-1, 1, seq]), tf.bool))
            att = tf.keras.layers.Dropout(0.1)(att)
            x = tf.keras.layers.LayerNormalization(epsilon=1e-12, name=name + "_ln1")(x + att)
            h = _dense(tf, x, inter, name + "_inter")
            h = tf.nn.gelu(h, approximate=(i % 2 == 1))
            h = _dense(tf, h, hidden, name + "_ffn_out")
            h = tf.keras.layers.Dropout(0.1)(h)
            x = tf.keras.layers.LayerNormalization(epsilon=1e-12, name=name + "_ln2")(x + h)
        first = tf.squeeze(x[:, 0:1, :], axis=1)
        pooled = _dense(tf, first, hidden, "pooler", activation="tanh")
        logits = _dense(tf, pooled, 2, "classifier")
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        params = v1.trainable_variables()
        grads = tf.gradients(loss, params)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        step = v1.train.get_or_create_global_step()
        v1.train.AdamOptimizer(1e-4).apply_gradients(zip(grads, params), global_step=step, name="train")
    return graph


def build_lstm_keras(tf, units=256, steps=32, features=64):
    """Two stacked tf.keras.layers.LSTM + Dense, mean squared error, AdamOptimizer."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, steps, features], name="x")
        y = v1.placeholder(tf.float32, [None, 1], name="y")
        h = tf.keras.layers.LSTM(units, return_sequences=True)(x)
        h = tf.keras.layers.LSTM(units)(h)
        out = tf.keras.layers.Dense(1)(h)
        loss = tf.reduce_mean(tf.square(out - y))
        v1.train.AdamOptimizer(1e-3).minimize(loss, name="train")
    return graph


def build_lstm_dynamic_rnn(tf, control_flow_v2, units=256, steps=32, features=64):
    """tf.compat.v1.nn.dynamic_rnn over an LSTMCell (v1 Enter/Exit frames or functional While), GradientDescent."""
    v1 = tf.compat.v1
    if control_flow_v2:
        v1.enable_control_flow_v2()
    else:
        v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [None, steps, features], name="x")
            y = v1.placeholder(tf.int32, [None], name="y")
            lengths = v1.placeholder(tf.int32, [None], name="lengths")
            cell = v1.nn.rnn_cell.LSTMCell(units)
            outputs, state = v1.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
            logits = v1.layers.dense(state.h, 10)
            loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
            v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    finally:
        v1.enable_control_flow_v2()
    return graph


def _graph_ops(tf, graph):
    """Every operation of the graph and of the function bodies in its library."""
    from tensorflow.python.framework import function_def_to_graph

    ops = list(graph.get_operations())
    seen = set()
    pending = list(graph.as_graph_def().library.function)
    while pending:
        fdef = pending.pop()
        if fdef.signature.name in seen:
            continue
        seen.add(fdef.signature.name)
        fgraph = function_def_to_graph.function_def_to_graph(fdef)
        ops.extend(fgraph.get_operations())
        pending.extend(fgraph.as_graph_def().library.function)
    return ops


def _is_float_op(op):
    tensors = list(op.inputs) + list(op.outputs)
    return any(t.dtype.base_dtype.name in _FLOAT_DTYPES for t in tensors)


def op_types(tf, graph):
    """Maps op type -> True when some node of that type has a float input or output."""
    found = {}
    for op in _graph_ops(tf, graph):
        found[op.type] = found.get(op.type, False) or _is_float_op(op)
    return found


MODELS = {
    "resnet50": lambda tf: build_resnet50(tf),
    "bert": lambda tf: build_bert(tf),
    "lstm_keras": lambda tf: build_lstm_keras(tf),
    "lstm_dynamic_rnn_cf_v1": lambda tf: build_lstm_dynamic_rnn(tf, control_flow_v2=False),
    "lstm_dynamic_rnn_cf_v2": lambda tf: build_lstm_dynamic_rnn(tf, control_flow_v2=True),
}


def describe(library, op_type):
    """One line of the table: status and, for op-info ops, the deciding IR type, colour and float dtypes."""
    info = library.info(op_type)
    if info is not None:
        dtypes = ",".join(sorted(info.float_dtypes))
        return f"{info.ir_type} {info.flag} [{dtypes}] ({info.dtype_source})"
    kind = library.not_compute_kind(op_type)
    if kind is not None:
        return f"not compute: {kind}"
    note = library.no_op_info_note(op_type)
    if note is not None:
        return f"no op info: {note}"
    return "UNRESOLVED"


def check(library, types_by_model, verbose=False, out=sys.stdout):
    """Prints per model the op types and the unresolved ones; returns the number of unresolved float types."""
    total_unresolved = 0
    union = {}
    for model, types in types_by_model.items():
        for op_type, is_float in types.items():
            union[op_type] = union.get(op_type, False) or is_float
    for model, types in list(types_by_model.items()) + [("all models", union)]:
        statuses = {}
        unresolved, unresolved_int = [], []
        for op_type, is_float in sorted(types.items()):
            status = library.status(op_type)
            statuses[status] = statuses.get(status, 0) + 1
            if status == "unknown":
                (unresolved if is_float else unresolved_int).append(op_type)
        floats = sum(1 for is_float in types.values() if is_float)
        summary = ", ".join(f"{key} {value}" for key, value in sorted(statuses.items()))
        out.write(f"{model}: {len(types)} op types ({floats} with float tensors): {summary}; "
                  f"unresolved float op types: {len(unresolved)} {unresolved}\n")
        if unresolved_int:
            out.write(f"  (integer/bool-only op types without an entry, not required: {unresolved_int})\n")
        if model != "all models":
            total_unresolved += len(unresolved)
    if verbose:
        for op_type in sorted(union):
            marker = "F" if union[op_type] else "-"
            out.write(f"  {op_type:40s} {marker} {describe(library, op_type)}\n")
    return total_unresolved


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--library", help="op library folder (default: the built-in ops_info/)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ",".join(MODELS))
    parser.add_argument("--dump", help="also write {model: {op type: has float tensors}} to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="print how every op type resolves")
    args = parser.parse_args(argv)
    unknown = [name for name in args.models.split(",") if name not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")

    from npu_sim_bridge.ops_info import load_library

    library = load_library(args.library)
    tf = _tf()
    types_by_model = {name: op_types(tf, MODELS[name](tf)) for name in args.models.split(",")}
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as handle:
            json.dump(types_by_model, handle, indent=1, sort_keys=True)
    unresolved = check(library, types_by_model, verbose=args.verbose)
    return 1 if unresolved else 0


if __name__ == "__main__":
    sys.exit(main())
