"""Runs a graph file (GraphDef, MetaGraphDef, SavedModel) through the offline rewrite and a Session, as bisect asks."""

from __future__ import annotations

import os

import numpy as np

from npu_sim_bridge.bisect.outcome import BisectError, NodeInfo, Outcome
from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.graph.attr_names import FUSED_FROM_ATTR
from npu_sim_bridge.graph.op_categories import PASS_FUSED_BASE_OPS, VARIABLE_VALUE_OPS

_PRECISION_KEYS = ("precision_mode", "precision_mode_v2")


def tensor_name(name: str) -> str:
    return name if ":" in name else f"{name}:0"


def load_feeds(pairs) -> dict[str, np.ndarray]:
    """{tensor name: array} from "NAME=FILE.npy" texts."""
    feeds = {}
    for pair in pairs or ():
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise BisectError(f"--feed expects NAME=FILE.npy, got {pair!r}")
        try:
            feeds[tensor_name(name.strip())] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise BisectError(f"--feed {name}: cannot read {path!r} as a .npy file ({err}); save the value with "
                              "numpy.save") from None
    return feeds


class GraphTarget:
    """A graph with fixed feeds and fetches; `run(overrides)` rewrites it with the options and runs it."""

    def __init__(self, graph, fetches, feeds=None, params=None):
        from npu_sim_bridge.graph.io import load_graph

        if not fetches:
            raise BisectError("name the tensor to compare with --fetch NAME (e.g. --fetch loss)")
        self.source = graph if isinstance(graph, (str, os.PathLike)) else type(graph).__name__
        try:
            self.graph_def, _ = load_graph(graph)
        except NpuSimError as err:
            raise BisectError(f"cannot read the graph: {err}") from None
        names = {node.name: node for node in self.graph_def.node}
        self.fetches = [tensor_name(name) for name in fetches]
        for fetch in self.fetches:
            if fetch.rsplit(":", 1)[0] not in names:
                raise BisectError(f"--fetch {fetch}: the graph has no node {fetch.rsplit(':', 1)[0]!r}"
                                  f"{_close(fetch.rsplit(':', 1)[0], names)}")
        self.feeds = dict(feeds or {})
        for feed, value in self.feeds.items():
            if feed.rsplit(":", 1)[0] not in names:
                raise BisectError(f"--feed {feed}: the graph has no node {feed.rsplit(':', 1)[0]!r}"
                                  f"{_close(feed.rsplit(':', 1)[0], names)}")
            _check_feed_shape(feed, np.asarray(value), names[feed.rsplit(":", 1)[0]])
        variables = sorted(n.name for n in self.graph_def.node if n.op in VARIABLE_VALUE_OPS)
        if variables:
            frozen = _frozen(graph, [fetch.rsplit(":", 1)[0] for fetch in self.fetches])
            if frozen is None:
                raise BisectError(
                    f"the graph holds variables ({', '.join(variables[:3])}{' ...' if len(variables) > 3 else ''}) "
                    "whose values this file does not carry; give a SavedModel folder or a .meta file next to its "
                    "checkpoint (model.ckpt.meta with model.ckpt.index), freeze the graph "
                    "(tf.compat.v1.graph_util.convert_variables_to_constants), or bisect the training script with "
                    "--script")
            self.graph_def = frozen
        self.params = dict(params or {})

    def describe(self) -> str:
        return f"{self.source} fetch {', '.join(self.fetches)}"

    def options(self, overrides: dict) -> dict:
        options = dict(self.params)
        if any(key in overrides for key in _PRECISION_KEYS):
            for key in _PRECISION_KEYS:
                options.pop(key, None)
        options.update(overrides)
        return {key: value for key, value in options.items() if value != ""}  # "": the option is unset

    def run(self, overrides: dict) -> Outcome:
        import tensorflow as tf
        from tensorflow.core.protobuf import config_pb2

        from npu_sim_bridge.api import rewrite

        result = rewrite(self.graph_def, self.options(overrides), fetches=[f.rsplit(":", 1)[0] for f in self.fetches])
        nodes = _node_infos(result.report, result.graph_def)
        config = config_pb2.ConfigProto()
        config.graph_options.rewrite_options.disable_meta_optimizer = True  # run what the rewrite made
        with tf.Graph().as_default() as graph:
            tf.graph_util.import_graph_def(result.graph_def, name="")
            try:
                with tf.compat.v1.Session(graph=graph, config=config) as sess:
                    values = sess.run(self.fetches, self.feeds)
            except tf.errors.OpError as err:
                return Outcome([], nodes, failure=_first_line(err.message))
            except (ValueError, TypeError) as err:  # a fed value TensorFlow refuses before running
                return Outcome([], nodes, failure=str(err).splitlines()[0])
        return Outcome([np.asarray(v) for v in values], nodes)


def _frozen(source, fetch_nodes):
    """The graph of a SavedModel folder, or of a .meta file beside its checkpoint, with the variables' values
    as constants; None for any other source."""
    import tensorflow as tf

    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    saved_model = os.path.isdir(path) and any(os.path.exists(os.path.join(path, name))
                                              for name in ("saved_model.pb", "saved_model.pbtxt"))
    checkpoint = path[:-len(".meta")] if path.endswith(".meta") else None
    if not saved_model and not (checkpoint and os.path.exists(checkpoint + ".index")):
        return None
    with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as sess:
        try:
            if saved_model:
                tags = _saved_model_tags(path)
                tf.compat.v1.saved_model.loader.load(sess, tags, path)
            else:
                tf.compat.v1.train.import_meta_graph(path).restore(sess, checkpoint)
            return tf.compat.v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), fetch_nodes)
        except (tf.errors.OpError, ValueError, OSError) as err:
            raise BisectError(f"cannot load the variables of {path!r}: {_first_line(str(err))}") from None


def _saved_model_tags(path):
    from tensorflow.python.saved_model import loader_impl

    metas = loader_impl.parse_saved_model(path).meta_graphs
    return list(metas[0].meta_info_def.tags) if metas else ["serve"]


def _node_infos(report, graph_def) -> dict[str, NodeInfo]:
    """Each node's decision; a fused node counts as its base op (MatMul for _FusedMatMul), with its members."""
    groups, base = {}, {}
    bodies = [graph_def.node] + [function.node_def for function in graph_def.library.function]
    for body in bodies:
        for node in body:
            if FUSED_FROM_ATTR in node.attr:
                members = [value.decode().rpartition(":")[0] for value in node.attr[FUSED_FROM_ATTR].list.s]
                members = list(dict.fromkeys(members + [node.name]))
                for member in members:
                    groups[member] = tuple(m for m in members if m != member)
                    if node.op in PASS_FUSED_BASE_OPS:  # a fused-away BiasAdd runs as part of the fused MatMul
                        base[member] = PASS_FUSED_BASE_OPS[node.op]
    return {name: NodeInfo(name, base.get(name, d.op), d.list, d.dtype_before, d.dtype_after, d.placement,
                           groups.get(name, ()))
            for name, d in report.nodes.items()}


def _check_feed_shape(feed: str, value: np.ndarray, node) -> None:
    """A fed placeholder's declared shape (its unknown dimensions aside) must be the value's."""
    if node.op not in ("Placeholder", "PlaceholderWithDefault") or "shape" not in node.attr:
        return
    shape = node.attr["shape"].shape
    if shape.unknown_rank:
        return
    declared = [dim.size for dim in shape.dim]
    if len(declared) != value.ndim or any(want not in (-1, got) for want, got in zip(declared, value.shape)):
        wanted = "(" + ", ".join("?" if dim == -1 else str(dim) for dim in declared) + ("," if len(declared) == 1 else "") + ")"
        raise BisectError(f"--feed {feed}: the file holds an array of shape {value.shape} but placeholder "
                          f"{node.name} takes shape {wanted}; save a value of that shape")


def _first_line(text: str) -> str:
    """The line of a TensorFlow run error that says what went wrong (not its traceback)."""
    import re

    missing = re.search(r"You must feed a value for placeholder tensor '([^']+)'([^\n]*)", text)
    if missing:
        return (f"placeholder {missing.group(1)} needs a value{missing.group(2)}: give it with "
                f"--feed {missing.group(1)}=FILE.npy")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node", "File ",
                                                             "[[", "Stack trace", "Node:"))]
    return lines[-1] if lines else text.strip()


def _close(name, names) -> str:
    import difflib

    match = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""
