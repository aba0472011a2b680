"""tensorflow.tools.graph_transforms.TransformGraph on TensorFlow 2.15 (whose wheel has no graph transform tool).

TransformGraph(graph_def, inputs, outputs, transforms) applies, in order, the transforms TF1 scripts
ask for when they prepare a frozen graph for inference: strip_unused_nodes, remove_nodes,
fold_constants (Grappler's constant folding), merge_duplicate_nodes, fold_batch_norms,
fold_old_batch_norms, sort_by_execution_order, remove_device, remove_attribute. Any other
transform (quantize_weights, quantize_nodes, ...) raises ValueError naming it and the ones
available. The GraphDef given is never changed; a new one comes back.
"""

import re
import types

import tensorflow as tf

from npu_sim_bridge.tf1compat import graph_transforms_fold as fold

_V1 = tf.compat.v1
_TRANSFORM = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$")


def _node_name(name):
    return name.lstrip("^").split(":")[0]


def parse_transform(text):
    """'remove_nodes(op=Identity, op=CheckNumerics)' -> ('remove_nodes', {'op': ['Identity', 'CheckNumerics']})."""
    match = _TRANSFORM.match(text)
    if match is None:
        raise ValueError(f"TransformGraph: cannot read the transform {text!r}; write name or name(arg=value, ...)")
    args = {}
    for part in _split_args(match.group(2) or ""):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"TransformGraph: argument {part!r} of {match.group(1)} has no '='; write arg=value")
        args.setdefault(key.strip(), []).append(value.strip().strip('"'))
    return match.group(1), args


def _split_args(text):
    """The comma-separated parts of `text`, commas inside double quotes kept (shape="1,224,224,3")."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def _flag(args, name, default=False):
    values = args.get(name)
    return default if not values else values[-1].lower() in ("true", "1", "yes")


def strip_unused_nodes(graph_def, inputs, outputs, args):
    """Keep what the outputs need, stopping at the inputs; inputs become Placeholders (type=, shape= set them)."""
    by_name = {node.name: node for node in graph_def.node}
    keep, stack = set(), list(outputs)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        if name not in by_name:
            raise ValueError(f"TransformGraph: node {name!r} is not in the graph")
        keep.add(name)
        if name not in inputs:
            stack.extend(_node_name(i) for i in by_name[name].input)
    result = _V1.GraphDef()
    result.versions.CopyFrom(graph_def.versions)
    result.library.CopyFrom(graph_def.library)
    dtype = tf.as_dtype(args.get("type", ["float"])[-1]).as_datatype_enum if "type" in args else None
    shape = [int(d) for d in args["shape"][-1].split(",")] if "shape" in args else None
    for node in graph_def.node:
        if node.name not in keep:
            continue
        if node.name in inputs and (node.op != "Placeholder" or dtype is not None or shape is not None):
            placeholder = result.node.add(name=node.name, op="Placeholder", device=node.device)
            known = node.attr["dtype"].type if "dtype" in node.attr else node.attr["T"].type if "T" in node.attr \
                else tf.float32.as_datatype_enum
            placeholder.attr["dtype"].type = dtype if dtype is not None else known
            if shape is not None:
                placeholder.attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())
            elif "shape" in node.attr:
                placeholder.attr["shape"].CopyFrom(node.attr["shape"])
        else:
            result.node.add().CopyFrom(node)
    return result


def remove_nodes(graph_def, inputs, outputs, args):
    """Remove the nodes of the op types op=... that have one data input; their consumers read that input."""
    types = set(args.get("op", []))
    if not types:
        raise ValueError("TransformGraph: remove_nodes needs op=<type> (e.g. remove_nodes(op=Identity))")
    protected = set(inputs) | set(outputs)
    removed = {}  # name -> (its data input, its control inputs)
    for node in graph_def.node:
        data = [i for i in node.input if not i.startswith("^")]
        if node.op in types and len(data) == 1 and node.name not in protected:
            removed[node.name] = (data[0], [i for i in node.input if i.startswith("^")])

    def resolve(name):
        seen = set()
        while _node_name(name) in removed and _node_name(name) not in seen:
            seen.add(_node_name(name))
            source = removed[_node_name(name)][0]
            name = ("^" + _node_name(source)) if name.startswith("^") else source
        return name

    result = fold.copy_header(graph_def)
    for node in graph_def.node:
        if node.name in removed:
            continue
        new = result.node.add()
        new.CopyFrom(node)
        del new.input[:]
        for name in node.input:
            new.input.append(resolve(name))
            if _node_name(name) in removed:
                new.input.extend(c for c in removed[_node_name(name)][1] if c not in new.input)
    fold.move_control_inputs_last(result)
    return result


def fold_constants(graph_def, inputs, outputs, args):
    """Grappler's constant folding, keeping the inputs and outputs."""
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    meta = _V1.train.export_meta_graph(graph=graph)
    meta.collection_def["train_op"].node_list.value.extend(outputs)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers.append("constfold")
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.min_graph_nodes = -1
    try:
        folded = tf_optimizer.OptimizeGraph(config, meta)
    except Exception:  # noqa: BLE001 - ignore_errors=true asks for the unfolded graph back
        if _flag(args, "ignore_errors"):
            return graph_def
        raise
    missing = [name for name in (*inputs, *outputs) if name not in {node.name for node in folded.node}]
    if missing:
        raise ValueError(f"TransformGraph: fold_constants lost the nodes {missing}")
    return folded


def merge_duplicate_nodes(graph_def, inputs, outputs, args):
    """Merge stateless nodes with the same op, attributes, device and inputs (identical constants too)."""
    from tensorflow.python.framework import op_def_registry

    protected = set(inputs) | set(outputs)
    current = graph_def
    while True:
        seen, replace = {}, {}
        for node in current.node:
            op_def = op_def_registry.get(node.op)
            if node.name in protected or op_def is None or op_def.is_stateful:
                continue
            key = (node.op, node.device, tuple(node.input),
                   tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in node.attr.items())))
            if key in seen:
                replace[node.name] = seen[key]
            else:
                seen[key] = node.name
        if not replace:
            return current
        current = fold.rename_inputs(current, replace)


def sort_by_execution_order(graph_def, inputs, outputs, args):
    """Nodes in an order where each comes after the nodes it reads (data and control)."""
    return fold.topological(graph_def)


def remove_device(graph_def, inputs, outputs, args):
    """Clear every node's device."""
    result = _V1.GraphDef()
    result.CopyFrom(graph_def)
    for node in result.node:
        node.device = ""
    return result


def remove_attribute(graph_def, inputs, outputs, args):
    """Remove attribute_name=... from every node (of op_name=... when given)."""
    names, ops = set(args.get("attribute_name", [])), set(args.get("op_name", []))
    if not names:
        raise ValueError("TransformGraph: remove_attribute needs attribute_name=<name>")
    result = _V1.GraphDef()
    result.CopyFrom(graph_def)
    for node in result.node:
        if not ops or node.op in ops:
            for name in names & set(node.attr):
                del node.attr[name]
    return result


TRANSFORMS = {
    "strip_unused_nodes": strip_unused_nodes, "remove_nodes": remove_nodes, "fold_constants": fold_constants,
    "merge_duplicate_nodes": merge_duplicate_nodes, "fold_batch_norms": fold.fold_batch_norms,
    "fold_old_batch_norms": fold.fold_old_batch_norms, "sort_by_execution_order": sort_by_execution_order,
    "remove_device": remove_device, "remove_attribute": remove_attribute,
}


def TransformGraph(input_graph_def, inputs, outputs, transforms):  # noqa: N802 - TensorFlow 1.15's name
    """Apply `transforms` (strings, in order) to a copy of input_graph_def; inputs/outputs are node names."""
    if isinstance(transforms, str):
        transforms = transforms.split()
    inputs = [_node_name(name) for name in inputs]
    outputs = [_node_name(name) for name in outputs]
    parsed = [parse_transform(text) for text in transforms]
    unknown = [name for name, _ in parsed if name not in TRANSFORMS]
    if unknown:
        raise ValueError(f"TransformGraph: the transforms {unknown} are not provided by npu_sim_bridge (TensorFlow "
                         f"2.15 has no graph transform tool); available: {', '.join(sorted(TRANSFORMS))}")
    graph_def = _V1.GraphDef()
    graph_def.CopyFrom(input_graph_def)
    for name, args in parsed:
        graph_def = TRANSFORMS[name](graph_def, inputs, outputs, args)
    return graph_def


def graph_transforms_module():
    """The module `from tensorflow.tools.graph_transforms import TransformGraph` gives."""
    module = types.ModuleType("tensorflow.tools.graph_transforms", __doc__)
    module.TransformGraph = TransformGraph
    return module

