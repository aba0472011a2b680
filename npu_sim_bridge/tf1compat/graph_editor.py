"""tf.contrib.graph_editor, selecting: op and tensor lists, graph walks, regex filters and SubGraphView.

Works on the live tf.compat.v1 Graph: Operation.inputs / Tensor.consumers() read the graph as it is now,
so walks see the edits of graph_editor_edit.py (reroute_ts, copies) at once. Editing and copying live
in graph_editor_edit.py and graph_editor_copy.py, whose names() gives the module a script sees as
tf.contrib.graph_editor.
"""

import re

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

Operation = tf_ops.Operation


def _is_iterable(value):
    try:
        iter(value)
    except TypeError:
        return False
    return True


def make_list_of_op(ops, check_graph=True, allow_graph=True, ignore_ts=False):
    """A list of tf.Operation from an Operation, an iterable of them, or a Graph (all its ops).

    Tensors raise TypeError unless ignore_ts (then they are left out); check_graph: all in one graph.
    """
    if isinstance(ops, tf.Graph):
        if not allow_graph:
            raise TypeError(f"expected a tf.Operation or a list of them, got the graph {ops!r}")
        return ops.get_operations()
    if isinstance(ops, Operation):
        return [ops]
    if isinstance(ops, tf.Tensor) or not _is_iterable(ops) or isinstance(ops, str):
        raise TypeError(f"expected a tf.Operation or an iterable of them, got {type(ops).__name__} {ops!r}")
    result = []
    for item in ops:
        if isinstance(item, Operation):
            result.append(item)
        elif isinstance(item, tf.Tensor) and ignore_ts:
            continue
        else:
            raise TypeError(f"expected tf.Operation items, got {type(item).__name__} {item!r} (pass tensor.op, or "
                            "ignore_ts=True)")
    if check_graph:
        get_unique_graph(result)
    return result


def make_list_of_t(ts, check_graph=True, allow_graph=True, ignore_ops=False):
    """A list of tf.Tensor from a Tensor, an iterable of them, or a Graph (every op's outputs)."""
    if isinstance(ts, tf.Graph):
        if not allow_graph:
            raise TypeError(f"expected a tf.Tensor or a list of them, got the graph {ts!r}")
        return get_tensors(ts)
    if isinstance(ts, tf.Tensor):
        return [ts]
    if isinstance(ts, Operation) or not _is_iterable(ts) or isinstance(ts, str):
        raise TypeError(f"expected a tf.Tensor or an iterable of them, got {type(ts).__name__} {ts!r}")
    result = []
    for item in ts:
        if isinstance(item, tf.Tensor):
            result.append(item)
        elif isinstance(item, Operation) and ignore_ops:
            continue
        else:
            raise TypeError(f"expected tf.Tensor items, got {type(item).__name__} {item!r} (pass op.outputs, or "
                            "ignore_ops=True)")
    if check_graph:
        get_unique_graph(result)
    return result


def get_unique_graph(tops, check_types=None, none_if_empty=False):
    """The one graph that the ops/tensors `tops` belong to; ValueError naming two that differ."""
    if isinstance(tops, tf.Graph):
        return tops
    graph = None
    for item in ([tops] if isinstance(tops, (Operation, tf.Tensor)) else tops):
        if check_types is not None and not isinstance(item, check_types):
            raise TypeError(f"expected {check_types}, got {type(item).__name__} {item!r}")
        if graph is None:
            graph = item.graph
        elif item.graph is not graph:
            raise ValueError(f"{item.name} is in another graph than the other ops and tensors given")
    if graph is None and not none_if_empty:
        raise ValueError("cannot tell the graph: no op or tensor was given")
    return graph


def get_tensors(graph):
    """Every output tensor of every op of `graph`."""
    if not isinstance(graph, tf.Graph):
        raise TypeError(f"expected a tf.Graph, got {type(graph).__name__}")
    return [t for op in graph.get_operations() for t in op.outputs]


def get_generating_ops(ts):
    """The ops producing the tensors `ts`."""
    return [t.op for t in make_list_of_t(ts, allow_graph=False)]


def get_consuming_ops(ts):
    """The ops consuming any of the tensors `ts` (each once, in order)."""
    result = []
    for t in make_list_of_t(ts, allow_graph=False):
        _extend_unique(result, t.consumers())
    return result


def key(item):
    """A hashable identity for an op or a tensor (tensors compare by value under TensorFlow 2 behaviour)."""
    return (item.op, item.value_index) if isinstance(item, tf.Tensor) else item


def _extend_unique(result, items, seen=None):
    seen = {key(item) for item in result} if seen is None else seen
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            result.append(item)


class ControlOutputs:
    """The ops that have a given op as a control input: ControlOutputs(graph).get(op). update() re-reads the graph."""

    def __init__(self, graph):
        if not isinstance(graph, tf.Graph):
            raise TypeError(f"expected a tf.Graph, got {type(graph).__name__}")
        self._graph = graph
        self._outputs = {}
        self.update()

    @property
    def graph(self):
        return self._graph

    def get(self, op):
        return list(self._outputs.get(op, ()))

    def get_all(self):
        return {op: list(found) for op, found in self._outputs.items()}

    def update(self):
        self._outputs = {}
        for op in self._graph.get_operations():
            for control in op.control_inputs:
                self._outputs.setdefault(control, []).append(op)
        return self


def _seeds(seed_ops, tensor_to_ops):
    """Seed ops from ops, tensors (their producers or consumers: tensor_to_ops), or a mix."""
    if isinstance(seed_ops, (Operation, tf.Tensor)):
        seed_ops = [seed_ops]
    result = []
    for item in seed_ops:
        if isinstance(item, tf.Tensor):
            _extend_unique(result, tensor_to_ops(item))
        elif isinstance(item, Operation):
            _extend_unique(result, [item])
        else:
            raise TypeError(f"expected tf.Operation or tf.Tensor seeds, got {type(item).__name__} {item!r}")
    return result


def _within(within_ops, within_ops_fn):
    allowed = None if within_ops is None else set(make_list_of_op(within_ops, check_graph=False))

    def accept(op):
        return (allowed is None or op in allowed) and (within_ops_fn is None or within_ops_fn(op))
    return accept


def _walk(seeds, neighbours, inclusive, accept):
    seeds = [op for op in seeds if accept(op)]
    result, seen, wave = list(seeds), set(seeds), list(seeds)
    while wave:
        new_wave = []
        for op in wave:
            for other in neighbours(op):
                if other not in seen and accept(other):
                    seen.add(other)
                    new_wave.append(other)
        result.extend(new_wave)
        wave = new_wave
    return result if inclusive else [op for op in result if op not in set(seeds)]


def get_forward_walk_ops(seed_ops, inclusive=True, within_ops=None, within_ops_fn=None, stop_at_ts=(),
                         control_outputs=None):
    """The ops reached from `seed_ops` following outputs to their consumers, breadth first, seeds first.

    Tensor seeds start at their consumers; tensors in stop_at_ts are not followed; control_outputs
    (a ControlOutputs, or True) also follows control edges; within_ops / within_ops_fn restrict the walk.
    """
    stop = {key(t) for t in make_list_of_t(() if stop_at_ts is None else stop_at_ts, check_graph=False)}
    seeds = _seeds(seed_ops, lambda t: t.consumers())
    if control_outputs is True:
        control_outputs = ControlOutputs(seeds[0].graph) if seeds else None

    def neighbours(op):
        found = [consumer for t in op.outputs if key(t) not in stop for consumer in t.consumers()]
        if control_outputs is not None:
            found.extend(control_outputs.get(op))
        return found
    return _walk(seeds, neighbours, inclusive, _within(within_ops, within_ops_fn))


def get_backward_walk_ops(seed_ops, inclusive=True, within_ops=None, within_ops_fn=None, stop_at_ts=(),
                          control_inputs=False):
    """The ops reached from `seed_ops` following inputs to their producers, breadth first, seeds first.

    Tensor seeds start at their producers; tensors in stop_at_ts are not followed; control_inputs=True
    also follows control inputs; within_ops / within_ops_fn restrict the walk.
    """
    stop = {key(t) for t in make_list_of_t(() if stop_at_ts is None else stop_at_ts, check_graph=False)}

    def neighbours(op):
        found = [t.op for t in op.inputs if key(t) not in stop]
        if control_inputs:
            found.extend(op.control_inputs)
        return found
    seeds = _seeds(seed_ops, lambda t: [t.op])
    return _walk(seeds, neighbours, inclusive, _within(within_ops, within_ops_fn))


def get_walks_intersection_ops(forward_seed_ops, backward_seed_ops, forward_inclusive=True,
                               backward_inclusive=True, within_ops=None, within_ops_fn=None, control_inputs=False,
                               control_outputs=None, control_ios=None):
    """The ops both on a forward walk from forward_seed_ops and a backward walk from backward_seed_ops."""
    if control_ios is not None:
        control_inputs, control_outputs = True, control_ios
    forward = get_forward_walk_ops(forward_seed_ops, forward_inclusive, within_ops, within_ops_fn,
                                   control_outputs=control_outputs)
    backward = set(get_backward_walk_ops(backward_seed_ops, backward_inclusive, within_ops, within_ops_fn,
                                         control_inputs=control_inputs))
    return [op for op in forward if op in backward]


def get_walks_union_ops(forward_seed_ops, backward_seed_ops, forward_inclusive=True, backward_inclusive=True,
                        within_ops=None, within_ops_fn=None, control_inputs=False, control_outputs=None,
                        control_ios=None):
    """The ops on a forward walk from forward_seed_ops or a backward walk from backward_seed_ops."""
    if control_ios is not None:
        control_inputs, control_outputs = True, control_ios
    result = get_forward_walk_ops(forward_seed_ops, forward_inclusive, within_ops, within_ops_fn,
                                  control_outputs=control_outputs)
    _extend_unique(result, get_backward_walk_ops(backward_seed_ops, backward_inclusive, within_ops, within_ops_fn,
                                                 control_inputs=control_inputs))
    return result


def get_ops_ios(ops, control_inputs=False, control_outputs=None, control_ios=None):
    """The ops connected to `ops` by an edge either way (their producers and consumers; control edges on request)."""
    if control_ios is not None:
        control_inputs, control_outputs = True, control_ios
    result = []
    for op in make_list_of_op(ops, allow_graph=False):
        _extend_unique(result, [t.op for t in op.inputs] + [c for t in op.outputs for c in t.consumers()])
        if control_inputs:
            _extend_unique(result, op.control_inputs)
        if control_outputs is not None:
            _extend_unique(result, control_outputs.get(op))
    return result


def get_within_boundary_ops(ops, seed_ops, boundary_ops=(), inclusive=True, control_inputs=False,
                            control_outputs=None, control_ios=None):
    """The ops of `ops` reached from seed_ops along edges either way without crossing boundary_ops (which are
    included when inclusive)."""
    ops = make_list_of_op(ops)
    seeds = make_list_of_op(seed_ops, allow_graph=False)
    boundary = set(make_list_of_op(boundary_ops, check_graph=False)) if boundary_ops else set()
    if boundary & set(seeds):
        raise ValueError("get_within_boundary_ops: the boundary ops and the seed ops intersect: "
                         f"{sorted(op.name for op in boundary & set(seeds))}")
    reached, wave = set(seeds), list(seeds)
    while wave:
        new_wave = []
        for op in get_ops_ios(wave, control_inputs, control_outputs, control_ios):
            if op in reached:
                continue
            if op in boundary:
                if inclusive:
                    reached.add(op)
            else:
                reached.add(op)
                new_wave.append(op)
        wave = new_wave
    return [op for op in ops if op in reached]


def _regex(regex):
    if isinstance(regex, re.Pattern):
        return regex
    if not isinstance(regex, str):
        raise TypeError(f"expected a regular expression (str or re.Pattern), got {type(regex).__name__} {regex!r}")
    return re.compile(regex)


def filter_ops(ops, positive_filter):
    """The ops for which positive_filter(op) is true (positive_filter=True: all of them)."""
    ops = make_list_of_op(ops)
    return ops if positive_filter is True else [op for op in ops if positive_filter(op)]


def filter_ts(ops, positive_filter):
    """The output tensors of `ops` for which positive_filter(tensor) is true (True: all of them)."""
    ts = [t for op in make_list_of_op(ops) for t in op.outputs]
    return ts if positive_filter is True else [t for t in ts if positive_filter(t)]


def filter_ops_from_regex(ops, regex):
    """The ops whose name the regular expression matches somewhere (re.search)."""
    pattern = _regex(regex)
    return filter_ops(ops, lambda op: pattern.search(op.name))


def filter_ts_from_regex(ops, regex):
    """The output tensors of `ops` whose name ("op:0") the regular expression matches somewhere (re.search)."""
    pattern = _regex(regex)
    return filter_ts(ops, lambda t: pattern.search(t.name))


def _select(args, kwargs, what):
    """(ops, tensors) named by `args`: regular expressions over kwargs['graph'], ops, tensors, lists of them."""
    unknown = set(kwargs) - {"graph", "positive_filter", "restrict_ops_regex", "restrict_ts_regex"}
    if unknown:
        raise TypeError(f"{what}: unexpected keyword arguments {sorted(unknown)}; it takes graph, positive_filter, "
                        "restrict_ops_regex and restrict_ts_regex")
    graph = kwargs.get("graph")
    items = []
    for arg in args:
        items.extend(arg if isinstance(arg, (list, tuple, set, frozenset)) else [arg])
    if graph is None:
        graph = get_unique_graph([item for item in items if isinstance(item, (Operation, tf.Tensor))],
                                 none_if_empty=True)
    ops, ts = [], []
    for item in items:
        if isinstance(item, (str, re.Pattern)):
            if graph is None:
                raise ValueError(f"{what}: the regular expression {getattr(item, 'pattern', item)!r} needs a graph: "
                                 "pass graph=... (or ops of that graph next to it)")
            pattern = _regex(item)
            text = pattern.pattern
            if not text.startswith("(?#ts)"):  # "(?#ops)..." selects ops only, "(?#ts)..." tensors only
                _extend_unique(ops, [op for op in graph.get_operations() if pattern.search(op.name)])
            if not text.startswith("(?#ops)"):
                _extend_unique(ts, [t for t in get_tensors(graph) if pattern.search(t.name)])
        elif isinstance(item, Operation):
            _extend_unique(ops, [item])
        elif isinstance(item, tf.Tensor):
            _extend_unique(ts, [item])
        else:
            raise TypeError(f"{what}: expected regular expressions, tf.Operation or tf.Tensor, got "
                            f"{type(item).__name__} {item!r}")
    positive = kwargs.get("positive_filter")
    if positive is not None:
        ops = [op for op in ops if positive(op)]
        ts = [t for t in ts if positive(t)]
    if kwargs.get("restrict_ops_regex") is not None:
        ops = filter_ops_from_regex(ops, kwargs["restrict_ops_regex"]) if ops else ops
    if kwargs.get("restrict_ts_regex") is not None:
        pattern = _regex(kwargs["restrict_ts_regex"])
        ts = [t for t in ts if pattern.search(t.name)]
    return ops, ts


def select_ops(*args, **kwargs):
    """The ops named by regular expressions (over graph=, matched with re.search), ops and lists of ops.

    A regular expression starting with "(?#ts)" names tensors only (select_ts), "(?#ops)" ops only.

    Tensors among the arguments are left out. Keywords: graph, positive_filter, restrict_ops_regex.
    """
    return _select(args, kwargs, "select_ops")[0]


def select_ts(*args, **kwargs):
    """The tensors named by regular expressions (over graph=), tensors and lists of tensors; ops are left out."""
    return _select(args, kwargs, "select_ts")[1]


def select_ops_and_ts(*args, **kwargs):
    """(select_ops(...), select_ts(...)) in one call."""
    return _select(args, kwargs, "select_ops_and_ts")
