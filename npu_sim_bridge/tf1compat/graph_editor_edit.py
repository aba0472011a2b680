"""tf.contrib.graph_editor, editing: SubGraphView, rerouting tensors, control inputs, copying ops with new inputs.

Edits change the live tf.compat.v1 Graph in place (Operation._update_input, _add_control_inputs), as
TensorFlow 1.15's graph_editor did. Copies are created in the destination graph in dependency order;
an input whose producer is not copied yet (a cycle: a while loop inside the copied ops) is connected
once that producer exists. graph_editor_copy.names() is the module a script gets as
tf.contrib.graph_editor.
"""

import copy as _copy

import tensorflow as tf

from npu_sim_bridge.tf1compat import graph_editor as select
from npu_sim_bridge.tf1compat.graph_editor import Operation, key, make_list_of_op, make_list_of_t

_V1 = tf.compat.v1


def _unique(items):
    result = []
    select._extend_unique(result, items)  # pylint: disable=protected-access
    return result


class SubGraphView:
    """A set of ops with the tensors at its boundary: inputs (consumed, produced outside) and outputs (produced,
    used outside or not at all). Passthrough tensors are both an input and an output."""

    def __init__(self, inside_ops=(), passthrough_ts=()):
        ops = make_list_of_op(inside_ops, check_graph=False)
        ts = make_list_of_t(passthrough_ts, check_graph=False)
        self._graph = select.get_unique_graph(ops + ts, none_if_empty=True)
        self._ops = ops
        inputs, outputs, inside = _boundary(ops)
        boundary = {key(t) for t in inputs + outputs + inside}
        self._passthrough_ts = [t for t in ts if key(t) not in boundary]
        self._input_ts = inputs + self._passthrough_ts
        self._output_ts = outputs + self._passthrough_ts

    @classmethod
    def _with(cls, ops, inputs, outputs, passthroughs=()):
        view = cls.__new__(cls)
        view._graph = select.get_unique_graph(list(ops) + list(inputs) + list(outputs), none_if_empty=True)
        view._ops, view._input_ts, view._output_ts = list(ops), list(inputs), list(outputs)
        view._passthrough_ts = list(passthroughs)
        return view

    graph = property(lambda self: self._graph)
    ops = property(lambda self: tuple(self._ops))
    inputs = property(lambda self: tuple(self._input_ts))
    outputs = property(lambda self: tuple(self._output_ts))
    passthroughs = property(lambda self: tuple(self._passthrough_ts))
    connected_inputs = property(lambda self: tuple(t for t in self._input_ts if not self.is_passthrough(t)))
    connected_outputs = property(lambda self: tuple(t for t in self._output_ts if not self.is_passthrough(t)))

    def is_passthrough(self, t):
        return any(key(t) == key(other) for other in self._passthrough_ts)

    def input_index(self, t):
        return _index_of(self._input_ts, t, "input")

    def output_index(self, t):
        return _index_of(self._output_ts, t, "output")

    def consumers(self):
        """The ops outside the view consuming its outputs."""
        inside = set(self._ops)
        return _unique(op for t in self._output_ts for op in t.consumers() if op not in inside)

    def copy(self):
        return _copy.copy(self)

    def remap_inputs(self, new_input_indices):
        """A view whose inputs are self.inputs[i] for i in new_input_indices (reordered, some left out)."""
        return self._with(self._ops, [self._input_ts[i] for i in new_input_indices], self._output_ts,
                          self._passthrough_ts)

    def remap_outputs(self, new_output_indices):
        """A view whose outputs are self.outputs[i] for i in new_output_indices (reordered, left out, repeated)."""
        return self._with(self._ops, self._input_ts, [self._output_ts[i] for i in new_output_indices],
                          self._passthrough_ts)

    def remap(self, new_input_indices=None, new_output_indices=None):
        view = self if new_input_indices is None else self.remap_inputs(new_input_indices)
        return view if new_output_indices is None else view.remap_outputs(new_output_indices)

    def remove_unused_ops(self, control_inputs=True):
        """A view keeping only the ops on a path from its connected inputs or to its connected outputs."""
        used = set(select.get_walks_union_ops(list(self.connected_inputs), list(self.connected_outputs),
                                              within_ops=self._ops, control_inputs=control_inputs))
        return self._with([op for op in self._ops if op in used], self._input_ts, self._output_ts,
                          self._passthrough_ts)

    def __bool__(self):
        return bool(self._ops or self._passthrough_ts)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __str__(self):
        return (f"SubGraphView (graphid={id(self._graph)}): {len(self._ops)} ops, inputs "
                f"{[t.name for t in self._input_ts]}, outputs {[t.name for t in self._output_ts]}")

    __repr__ = __str__


def _index_of(ts, t, what):
    for index, other in enumerate(ts):
        if key(other) == key(t):
            return index
    raise ValueError(f"{getattr(t, 'name', t)} is not an {what} of this SubGraphView")


def _boundary(ops):
    """(inputs from outside, outputs used outside or unused, tensors produced and consumed inside)."""
    inside_ops = set(ops)
    consumed = _unique(t for op in ops for t in op.inputs)
    produced = [t for op in ops for t in op.outputs]
    inside = [t for t in consumed if t.op in inside_ops]
    only_inside = {key(t) for t in inside if not set(t.consumers()) - inside_ops}
    return ([t for t in consumed if t.op not in inside_ops], [t for t in produced if key(t) not in only_inside],
            inside)


def make_view(*args, **kwargs):
    """A SubGraphView from ops, tensors (passthroughs), regular expressions (with graph=) or a SubGraphView."""
    if len(args) == 1 and isinstance(args[0], SubGraphView) and not kwargs:
        return args[0]
    ops, ts = select.select_ops_and_ts(*args, **kwargs)
    return SubGraphView(ops, ts)


def make_view_from_scope(scope, graph):
    """The SubGraphView of the ops of `graph` under the name scope `scope`."""
    prefix = scope if scope.endswith("/") else scope + "/"
    return SubGraphView([op for op in graph.get_operations() if op.name.startswith(prefix)])


# ---------------------------------------------------------------------------------------------------
# Rerouting and control inputs


def _pairs(ts0, ts1, what):
    ts0, ts1 = make_list_of_t(ts0, check_graph=False), make_list_of_t(ts1, check_graph=False)
    if len(ts0) != len(ts1):
        raise ValueError(f"{what}: ts0 has {len(ts0)} tensors and ts1 {len(ts1)}; they pair up one to one")
    for t0, t1 in zip(ts0, ts1):
        if t0.graph is not t1.graph:
            raise ValueError(f"{what}: {t0.name} and {t1.name} are in different graphs")
        if t0.dtype.base_dtype != t1.dtype.base_dtype:
            raise TypeError(f"{what}: {t0.name} is {t0.dtype.name} but {t1.name} is {t1.dtype.name}; a consumer "
                            "can only be moved to a tensor of its dtype")
    return ts0, ts1


def _may_modify(can_modify, cannot_modify):
    allowed = None if can_modify is None else set(make_list_of_op(can_modify, check_graph=False))
    forbidden = set() if cannot_modify is None else set(make_list_of_op(cannot_modify, check_graph=False))
    return lambda op: (allowed is None or op in allowed) and op not in forbidden


def _move_consumers(old, new, consumers):
    count = 0
    for op in consumers:
        for index, t in enumerate(op.inputs):
            if key(t) == key(old):
                op._update_input(index, new)  # pylint: disable=protected-access
                count += 1
    return count


def reroute_ts(ts0, ts1, can_modify=None, cannot_modify=None):
    """For each pair, the consumers of ts1[i] consume ts0[i] instead (ts1's ends are left dangling).

    Only consumers in can_modify (when given) and not in cannot_modify change. Returns how many
    op inputs were changed.
    """
    ts0, ts1 = _pairs(ts0, ts1, "reroute_ts")
    may = _may_modify(can_modify, cannot_modify)
    count = 0
    for t0, t1 in zip(ts0, ts1):
        if t0 is not t1:
            count += _move_consumers(t1, t0, [op for op in t1.consumers() if may(op)])
    return count


def swap_ts(ts0, ts1, can_modify=None, cannot_modify=None):
    """For each pair, the consumers of ts0[i] and of ts1[i] swap tensors. Returns how many inputs changed."""
    ts0, ts1 = _pairs(ts0, ts1, "swap_ts")
    may = _may_modify(can_modify, cannot_modify)
    count = 0
    for t0, t1 in zip(ts0, ts1):
        if t0 is not t1:
            consumers0 = [op for op in t0.consumers() if may(op)]
            consumers1 = [op for op in t1.consumers() if may(op)]
            count += _move_consumers(t0, t1, consumers0) + _move_consumers(t1, t0, consumers1)
    return count


def add_control_inputs(op, cops):
    """Make the ops `cops` control inputs of `op` (ValueError if one already is)."""
    if not isinstance(op, Operation):
        raise TypeError(f"add_control_inputs: expected a tf.Operation, got {type(op).__name__} {op!r}")
    cops = make_list_of_op(cops, check_graph=False)
    for cop in cops:
        if cop.graph is not op.graph:
            raise ValueError(f"add_control_inputs: {cop.name} is in another graph than {op.name}")
        if cop in op.control_inputs:
            raise ValueError(f"add_control_inputs: {cop.name} is already a control input of {op.name}")
    op._add_control_inputs(cops)  # pylint: disable=protected-access


def remove_control_inputs(op, cops):
    """Remove the control inputs `cops` from `op` (ValueError if one is not a control input of it)."""
    if not isinstance(op, Operation):
        raise TypeError(f"remove_control_inputs: expected a tf.Operation, got {type(op).__name__} {op!r}")
    cops = make_list_of_op(cops, check_graph=False)
    current = list(op.control_inputs)
    for cop in cops:
        if cop not in current:
            raise ValueError(f"remove_control_inputs: {cop.name} is not a control input of {op.name}")
    keep = [c for c in current if c not in set(cops)]
    op._remove_all_control_inputs()  # pylint: disable=protected-access
    if keep:
        op._add_control_inputs(keep)  # pylint: disable=protected-access
