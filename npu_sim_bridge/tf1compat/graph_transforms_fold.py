"""GraphDef helpers of TransformGraph and its two folds of batch norm scaling into convolution / MatMul weights.

fold_batch_norms: Mul(Conv2D|MatMul|DepthwiseConv2dNative(x, W), c) with W and c constant becomes the
op with W scaled by c per output channel. fold_old_batch_norms: an inference batch norm
(FusedBatchNorm*, BatchNormWithGlobalNormalization) of such an op with constant parameters becomes the
op with scaled weights followed by a BiasAdd, named as the batch norm was. The op whose weights
change must feed nothing else; otherwise, and for NCHW data, the node is left as it is.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import tensor_util

_V1 = tf.compat.v1
_WEIGHTED = ("Conv2D", "MatMul", "DepthwiseConv2dNative")


def _name(reference):
    return reference.lstrip("^").split(":")[0]


def _port_zero(reference):
    parts = reference.lstrip("^").split(":")
    return not reference.startswith("^") and (len(parts) == 1 or parts[1] == "0")


def _attr(node, name, field, default):
    """node.attr[name].<field> without adding the attribute when it is absent (a protobuf map would)."""
    return getattr(node.attr[name], field) if name in node.attr else default


def copy_header(graph_def):
    result = _V1.GraphDef()
    result.versions.CopyFrom(graph_def.versions)
    result.library.CopyFrom(graph_def.library)
    return result


def move_control_inputs_last(graph_def):
    """Put each node's control inputs after its data inputs, as a GraphDef requires (in place)."""
    for node in graph_def.node:
        data = [i for i in node.input if not i.startswith("^")]
        control = []
        for i in node.input:
            if i.startswith("^") and i not in control:
                control.append(i)
        del node.input[:]
        node.input.extend(data + control)


def rename_inputs(graph_def, replace):
    """A copy without the nodes named in `replace`, every reference to one pointing at its replacement."""
    result = copy_header(graph_def)
    for node in graph_def.node:
        if node.name in replace:
            continue
        new = result.node.add()
        new.CopyFrom(node)
        del new.input[:]
        for reference in node.input:
            name = _name(reference)
            if name in replace:
                reference = reference.replace(name, replace[name], 1)
            if not (reference.startswith("^") and reference in new.input):
                new.input.append(reference)
    move_control_inputs_last(result)
    return result


def topological(graph_def):
    """A copy with the nodes in an order where each follows the nodes it reads (cycles: original order)."""
    by_name = {node.name: node for node in graph_def.node}
    order, done, visiting = [], set(), set()

    def visit(name):
        if name in done or name in visiting or name not in by_name:
            return
        visiting.add(name)
        for reference in by_name[name].input:
            visit(_name(reference))
        visiting.discard(name)
        done.add(name)
        order.append(by_name[name])

    for node in graph_def.node:
        visit(node.name)
    result = copy_header(graph_def)
    result.node.extend(order)
    return result


def _consumers(graph_def):
    counts = {}
    for node in graph_def.node:
        for reference in node.input:
            counts.setdefault(_name(reference), []).append((node.name, reference))
    return counts


def _constant(by_name, reference):
    node = by_name.get(_name(reference))
    if node is None or node.op != "Const" or not _port_zero(reference):
        return None
    return tensor_util.MakeNdarray(node.attr["value"].tensor)


def _const_node(name, value, dtype_enum):
    node = _V1.NodeDef(name=name, op="Const")
    node.attr["dtype"].type = dtype_enum
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value, tf.as_dtype(dtype_enum)))
    return node


def _scaled_weights(op, weights, scale, transpose_b=False):
    """The weights of `op` with output channel k multiplied by scale[k]; None when the shapes do not fit."""
    scale = np.reshape(scale, [-1])
    if op == "DepthwiseConv2dNative":
        if weights.ndim != 4 or scale.size not in (1, weights.shape[2] * weights.shape[3]):
            return None
        return weights * (scale if scale.size == 1 else scale.reshape(weights.shape[2], weights.shape[3]))
    if op == "MatMul" and transpose_b:
        return weights * (scale[:, None] if scale.size == weights.shape[0] else scale) \
            if scale.size in (1, weights.shape[0]) else None
    return weights * scale if scale.size in (1, weights.shape[-1]) else None


def _weighted_input(by_name, consumers, reference):
    """The op (Conv2D/MatMul/Depthwise) behind `reference` if its only consumer is the caller and W is constant."""
    node = by_name.get(_name(reference))
    if node is None or node.op not in _WEIGHTED or not _port_zero(reference):
        return None
    if len(consumers.get(node.name, [])) != 1 or _attr(node, "data_format", "s", b"NHWC") == b"NCHW":
        return None
    if _constant(by_name, node.input[1]) is None:
        return None
    return node


def _fold(graph_def, outputs, match):
    """Apply `match(node, by_name, consumers)` -> [new nodes] or None to each node; drop constants left unused."""
    by_name = {node.name: node for node in graph_def.node}
    consumers = _consumers(graph_def)
    replaced, added = {}, []
    for node in graph_def.node:
        if node.name in replaced:
            continue
        result = match(node, by_name, consumers)
        if result is not None:
            new_nodes, removed = result
            replaced[node.name] = new_nodes
            for name in removed:
                replaced.setdefault(name, [])
    if not replaced:
        return graph_def
    folded = copy_header(graph_def)
    for node in graph_def.node:
        if node.name in replaced:
            added.extend(replaced[node.name])
        else:
            folded.node.add().CopyFrom(node)
    folded.node.extend(added)
    used = {_name(reference) for node in folded.node for reference in node.input} | set(outputs)
    pruned = copy_header(folded)
    pruned.node.extend(node for node in folded.node if node.op != "Const" or node.name in used)
    return topological(pruned)


def _rebuilt(weighted, by_name, scale, name, suffix):
    """A copy of the weighted op named `name` reading scaled constant weights (or None if they do not fit)."""
    weights = _constant(by_name, weighted.input[1])
    new_weights = _scaled_weights(weighted.op, weights, scale, _attr(weighted, "transpose_b", "b", False))
    if new_weights is None:
        return None
    const = _const_node(f"{name}/{suffix}", new_weights.astype(weights.dtype), weighted.attr["T"].type)
    op = _V1.NodeDef()
    op.CopyFrom(weighted)
    op.name = name
    op.input[1] = const.name
    return op, const


def fold_batch_norms(graph_def, inputs, outputs, args):
    """Mul(weighted op, constant) -> the weighted op with scaled weights (see the module docstring)."""
    del inputs, args

    def match(node, by_name, consumers):
        if node.op != "Mul" or len(node.input) != 2:
            return None
        for first, second in ((0, 1), (1, 0)):
            weighted = _weighted_input(by_name, consumers, node.input[first])
            scale = _constant(by_name, node.input[second])
            if weighted is not None and scale is not None:
                rebuilt = _rebuilt(weighted, by_name, scale, node.name, "scaled_weights")
                if rebuilt is not None:
                    return list(rebuilt), [weighted.name]
        return None
    return _fold(graph_def, outputs, match)


_BATCH_NORMS = {"FusedBatchNorm": (1, 2, 3, 4, "epsilon"), "FusedBatchNormV2": (1, 2, 3, 4, "epsilon"),
                "FusedBatchNormV3": (1, 2, 3, 4, "epsilon"),
                "BatchNormWithGlobalNormalization": (4, 3, 1, 2, "variance_epsilon")}


def fold_old_batch_norms(graph_def, inputs, outputs, args):
    """Inference batch norm of a weighted op -> the op with scaled weights + BiasAdd (see the module docstring)."""
    del inputs, args

    def match(node, by_name, consumers):
        layout = _BATCH_NORMS.get(node.op)
        if layout is None or _attr(node, "is_training", "b", False) or \
                _attr(node, "data_format", "s", b"NHWC") == b"NCHW":
            return None
        if not all(_port_zero(reference) for _, reference in consumers.get(node.name, [])):
            return None  # the batch statistics outputs, or a control edge, are used
        gamma, beta, mean, variance = (_constant(by_name, node.input[i]) for i in layout[:4])
        weighted = _weighted_input(by_name, consumers, node.input[0])
        if weighted is None or any(value is None for value in (gamma, beta, mean, variance)):
            return None
        if node.op == "BatchNormWithGlobalNormalization" and not _attr(node, "scale_after_normalization", "b", True):
            gamma = np.ones_like(gamma)
        scale = gamma / np.sqrt(variance + _attr(node, layout[4], "f", 1e-3))
        rebuilt = _rebuilt(weighted, by_name, scale, weighted.name, "folded_weights")
        if rebuilt is None:
            return None
        op, const = rebuilt
        dtype = weighted.attr["T"].type
        bias = _const_node(f"{node.name}/folded_bias", (beta - mean * scale).astype(
            tf.as_dtype(dtype).as_numpy_dtype), dtype)
        add = _V1.NodeDef(name=node.name, op="BiasAdd", input=[op.name, bias.name], device=node.device)
        add.attr["T"].type = dtype
        return [op, const, bias, add], [weighted.name]
    return _fold(graph_def, outputs, match)
