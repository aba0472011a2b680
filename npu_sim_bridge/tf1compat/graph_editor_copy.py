"""tf.contrib.graph_editor, copying: copy, copy_with_input_replacements, graph_replace and TransformerInfo.

A copy recreates each op of a SubGraphView from its NodeDef (type, attributes, device) with new
inputs: a replacement where replacement_ts names one, the copy of the producer when the producer is
copied too, else the original tensor (same graph) or a placeholder (another graph). Control inputs
follow the same rule (dropped across graphs). Names get dst_scope in place of src_scope and are made
unique in the destination graph, as TensorFlow 1.15 did, so copies into the same graph live beside
the originals. names() is the module a script gets as tf.contrib.graph_editor (editing and selecting
from graph_editor_edit.py and graph_editor.py, copying from here).
"""

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from npu_sim_bridge.tf1compat import graph_editor as select
from npu_sim_bridge.tf1compat.graph_editor import Operation, key
from npu_sim_bridge.tf1compat import graph_editor_edit as edit
from npu_sim_bridge.tf1compat.graph_editor_edit import SubGraphView, make_view

_V1 = tf.compat.v1


class TransformerInfo:
    """What a copy made: transformed(original) gives the copy of an op or tensor, original(copy) the reverse.

    `_transformed_ops` maps each original op to its copy (TensorFlow 1.15 scripts read it directly);
    graph/scope are the source's, graph_/scope_ the destination's.
    """

    def __init__(self, graph, scope, dst_graph, dst_scope):
        self.graph, self.scope, self.graph_, self.scope_ = graph, scope, dst_graph, dst_scope
        self._transformed_ops = {}
        self._transformed_ts = {}

    def _record_op(self, original, copied):
        self._transformed_ops[original] = copied
        for old, new in zip(original.outputs, copied.outputs):
            self._transformed_ts[key(old)] = new

    def _lookup(self, table, item, missing_fn):
        if isinstance(item, Operation):
            found = table["ops"].get(item)
        elif isinstance(item, tf.Tensor):
            found = table["ts"].get(key(item))
        else:
            raise TypeError(f"expected a tf.Operation or tf.Tensor, got {type(item).__name__} {item!r}")
        return missing_fn(item) if found is None and missing_fn is not None else found

    def _map(self, table, items, missing_fn):
        if isinstance(items, (Operation, tf.Tensor)):
            return self._lookup(table, items, missing_fn)
        if not isinstance(items, (list, tuple, dict)):
            items = list(items)
        return tf.nest.map_structure(lambda item: self._lookup(table, item, missing_fn), items)

    def transformed(self, original, missing_fn=None):
        """The copy of an op or tensor (or of each in a list/tuple/dict); None, or missing_fn(x), if not copied."""
        return self._map({"ops": self._transformed_ops, "ts": self._transformed_ts}, original, missing_fn)

    def original(self, transformed, missing_fn=None):
        """The original of a copied op or tensor (or of each in a list/tuple/dict)."""
        reverse = {"ops": {new: old for old, new in self._transformed_ops.items()},
                   "ts": {key(new): self._original_t(old_key) for old_key, new in self._transformed_ts.items()}}
        return self._map(reverse, transformed, missing_fn)

    @staticmethod
    def _original_t(old_key):
        op, index = old_key
        return op.outputs[index]

    def __str__(self):
        return (f"TransformerInfo: {len(self._transformed_ops)} ops copied from scope {self.scope!r} to "
                f"{self.scope_!r}{'' if self.graph is self.graph_ else ' in another graph'}")


def _scope(name):
    return name if not name or name.endswith("/") else name + "/"


def _used_scope(graph, scope):
    return any(op.name.startswith(scope) for op in graph.get_operations())


def _copy_order(ops):
    """`ops` with every op after the ops of `ops` it reads from (data and control), where there is no cycle."""
    inside = set(ops)
    pending = {op: {t.op for t in op.inputs if t.op in inside} | {c for c in op.control_inputs if c in inside}
               for op in ops}
    order, done = [], set()
    while len(order) < len(ops):
        ready = [op for op in ops if op not in done and not (pending[op] - done)]
        if not ready:  # a cycle (a while loop): take the first left; its late inputs are connected afterwards
            ready = [next(op for op in ops if op not in done)]
        for op in ready:
            done.add(op)
            order.append(op)
    return order


def _colocation(attr_value, info, names):
    """The colocation list `loc:@op` of a copy: copied ops by their new name, others kept in the same graph."""
    kept = []
    for entry in attr_value.list.s:
        target = entry.decode()[len("loc:@"):]
        if target in names:
            kept.append(f"loc:@{names[target]}".encode())
        elif info.graph is info.graph_:
            kept.append(entry)
    value = tf.compat.v1.AttrValue()
    value.list.s.extend(kept)
    return value


def copy_with_input_replacements(sgv, replacement_ts, dst_graph=None, dst_scope="", src_scope="",
                                 reuse_dst_scope=False):
    """Copy the ops of `sgv` (a SubGraphView, op or op list), the tensors of replacement_ts (a dict) replaced.

    Returns (the SubGraphView of the copy, TransformerInfo). Its inputs/outputs correspond one to one
    to those of `sgv`.
    """
    sgv = make_view(sgv)
    if not isinstance(replacement_ts, dict):
        raise TypeError(f"copy_with_input_replacements: replacement_ts must be a dict {{original tensor: "
                        f"replacement}}, got {type(replacement_ts).__name__}")
    graph = sgv.graph or _V1.get_default_graph()
    dst_graph = graph if dst_graph is None else dst_graph
    if not isinstance(dst_graph, tf.Graph):
        raise TypeError(f"copy: dst_graph must be a tf.Graph, got {type(dst_graph).__name__}")
    src_scope, dst_scope = _scope(src_scope), _scope(dst_scope)
    if dst_scope and not reuse_dst_scope:  # a scope of its own: dst_scope, else dst_scope_1, dst_scope_2, ...
        base, number = dst_scope[:-1], 0
        while _used_scope(dst_graph, dst_scope):
            number += 1
            dst_scope = f"{base}_{number}/"
    replacements = {key(old): new for old, new in replacement_ts.items()}
    for old, new in replacement_ts.items():
        if not isinstance(old, tf.Tensor) or not isinstance(new, tf.Tensor):
            raise TypeError(f"copy_with_input_replacements: replacement_ts maps tensors to tensors, got "
                            f"{old!r}: {new!r}")
        if new.graph is not dst_graph:
            raise ValueError(f"copy_with_input_replacements: the replacement {new.name} for {old.name} is not in the "
                             "destination graph")
    info = TransformerInfo(graph, src_scope, dst_graph, dst_scope)
    order = _copy_order(list(sgv.ops))
    new_names = {}
    late = []
    with dst_graph.as_default(), dst_graph.name_scope(None), dst_graph.control_dependencies(None):
        for t in sgv.inputs:
            info._transformed_ts[key(t)] = _external_input(t, replacements, info)
        for op in order:
            inputs = []
            for index, t in enumerate(op.inputs):
                new = replacements.get(key(t))
                new = info._transformed_ts.get(key(t)) if new is None else new
                if new is None:
                    if t.op not in info._transformed_ops and dst_graph is not graph:
                        raise ValueError(f"copy: {op.name} reads {t.name} inside a cycle; copies of a cycle (a while "
                                         "loop) are made within its own graph only")
                    late.append((op, index, t))
                    new = t
                inputs.append(new)
            name = op.name[len(src_scope):] if src_scope and op.name.startswith(src_scope) else op.name
            attrs = dict(op.node_def.attr)
            if "_class" in attrs:
                attrs["_class"] = _colocation(attrs["_class"], info, new_names)
            copied = dst_graph._create_op_internal(  # pylint: disable=protected-access
                op.type, inputs, name=dst_scope + name, attrs=attrs, op_def=op.op_def, compute_device=False)
            copied._set_device(op.device)  # pylint: disable=protected-access
            if dst_graph is graph:
                copied._set_control_flow_context(op._get_control_flow_context())  # pylint: disable=protected-access
            new_names[op.name] = copied.name
            info._record_op(op, copied)
    for op, index, t in late:
        info._transformed_ops[op]._update_input(index, info._transformed_ts[key(t)])  # pylint: disable=W0212
    for op in order:
        controls = [info._transformed_ops[c] if c in info._transformed_ops else c for c in op.control_inputs]
        controls = [c for c in controls if c.graph is dst_graph]
        if controls:
            info._transformed_ops[op]._add_control_inputs(controls)  # pylint: disable=protected-access
    copied_ops = [info._transformed_ops[op] for op in sgv.ops]
    view = SubGraphView._with(copied_ops, info.transformed(list(sgv.inputs)),  # pylint: disable=protected-access
                              info.transformed(list(sgv.outputs)), info.transformed(list(sgv.passthroughs)))
    return view, info


def _external_input(t, replacements, info):
    """What a copied op reads in place of the outside tensor t: its replacement, t itself, or a placeholder."""
    if key(t) in replacements:
        return replacements[key(t)]
    if info.graph_ is info.graph:
        return t
    name = "geph__" + t.op.name.replace("/", "__") + f"_{t.value_index}"
    return _V1.placeholder(t.dtype.base_dtype, t.shape, name=info.scope_ + name)


def copy(sgv, dst_graph=None, dst_scope="", src_scope="", reuse_dst_scope=False):
    """Copy the ops of `sgv` (outside inputs kept in the same graph, placeholders in another): (SubGraphView, info)."""
    return copy_with_input_replacements(sgv, {}, dst_graph, dst_scope, src_scope, reuse_dst_scope)


def graph_replace(target_ts, replacement_ts, dst_scope="", src_scope="", reuse_dst_scope=False):
    """Copies of the target tensors computed from the replacement tensors: the ops between the keys of
    replacement_ts and target_ts are copied with those inputs replaced. `target_ts` may be nested."""
    flat = tf.nest.flatten(target_ts)
    if not replacement_ts:
        return target_ts
    graph = select.get_unique_graph(flat, check_types=(tf.Tensor,))
    ops = select.get_walks_intersection_ops(list(replacement_ts), flat, control_ios=select.ControlOutputs(graph))
    if not ops:
        raise ValueError("graph_replace: the targets " f"{[t.name for t in flat]} do not depend on the replaced "
                         f"tensors {[t.name for t in replacement_ts]}")
    _, info = copy_with_input_replacements(ops, replacement_ts, None, dst_scope, src_scope, reuse_dst_scope)
    return info.transformed(target_ts, missing_fn=lambda original: original)


def names():
    """The names of tf.contrib.graph_editor; its util/select/subgraph/reroute/edit/transform modules as dicts."""
    add_operation_attributes()
    util = {name: getattr(select, name) for name in (
        "make_list_of_op", "make_list_of_t", "get_unique_graph", "get_tensors", "get_generating_ops",
        "get_consuming_ops", "ControlOutputs")}
    selecting = {name: getattr(select, name) for name in (
        "get_forward_walk_ops", "get_backward_walk_ops", "get_walks_intersection_ops", "get_walks_union_ops",
        "get_within_boundary_ops", "get_ops_ios",
        "filter_ops", "filter_ts", "filter_ops_from_regex", "filter_ts_from_regex", "select_ops", "select_ts",
        "select_ops_and_ts")}
    subgraph = {"SubGraphView": SubGraphView, "make_view": make_view,
                "make_view_from_scope": edit.make_view_from_scope}
    reroute = {"reroute_ts": edit.reroute_ts, "swap_ts": edit.swap_ts, "add_control_inputs": edit.add_control_inputs,
               "remove_control_inputs": edit.remove_control_inputs}
    transform = {"copy": copy, "copy_with_input_replacements": copy_with_input_replacements,
                 "graph_replace": graph_replace, "TransformerInfo": TransformerInfo}
    return {**util, **selecting, **subgraph, **reroute, **transform, "sgv": make_view, "ph": _placeholder_like,
            "util": util, "select": selecting, "subgraph": subgraph, "reroute": reroute, "edit": reroute,
            "transform": transform}


def _placeholder_like(dtype, shape=None, scope=None):
    """tf.contrib.graph_editor.ph: a placeholder of dtype and shape, named under `scope`."""
    with _V1.name_scope(scope):
        return _V1.placeholder(dtype, shape, name="geph")


def add_operation_attributes():
    """Give tf.Operation TensorFlow 1.15's `_outputs` (scripts using graph_editor read op._outputs[0])."""
    if not hasattr(tf_ops.Operation, "_outputs"):
        tf_ops.Operation._outputs = property(lambda op: list(op.outputs))  # pylint: disable=protected-access
