"""Reading graphs from what users have: GraphDef, MetaGraphDef, SavedModel, tf.Graph or a file."""

from __future__ import annotations

import os
from typing import Any

from google.protobuf import message, text_format
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from npu_sim_bridge.errors import NpuSimError


class GraphInputError(NpuSimError, ValueError):
    """A graph argument or file could not be read as a GraphDef, MetaGraphDef or SavedModel."""


def load_graph(source: Any) -> tuple[graph_pb2.GraphDef, list[str]]:
    """(GraphDef, default fetch names) from a GraphDef, MetaGraphDef, tf.Graph or path."""
    if isinstance(source, graph_pb2.GraphDef):
        return source, []
    if isinstance(source, meta_graph_pb2.MetaGraphDef):
        return source.graph_def, _meta_graph_fetches(source)
    if isinstance(source, saved_model_pb2.SavedModel):
        return _from_saved_model(source, "SavedModel")
    if hasattr(source, "as_graph_def"):  # a tf.Graph
        return source.as_graph_def(), []
    if isinstance(source, (str, os.PathLike)):
        return _from_path(os.fspath(source))
    raise GraphInputError(
        f"cannot read a graph from a {type(source).__name__}: pass a GraphDef, MetaGraphDef, "
        "tf.Graph, or the path of a .pb/.pbtxt/.meta file or a SavedModel directory")


def _meta_graph_fetches(meta: meta_graph_pb2.MetaGraphDef) -> list[str]:
    fetches: list[str] = []
    collection = meta.collection_def.get("train_op")
    if collection is not None:
        fetches.extend(v.decode() if isinstance(v, bytes) else v
                       for v in collection.node_list.value)
    for signature in meta.signature_def.values():
        fetches.extend(tensor.name for tensor in signature.outputs.values() if tensor.name)
    return list(dict.fromkeys(fetches))


def _from_saved_model(saved: saved_model_pb2.SavedModel, where: str):
    if not saved.meta_graphs:
        raise GraphInputError(f"{where} holds no MetaGraph")
    meta = saved.meta_graphs[0]
    return meta.graph_def, _meta_graph_fetches(meta)


def _from_path(path: str):
    if not os.path.exists(path):
        raise GraphInputError(f"graph file {path!r} does not exist")
    if not os.path.isdir(path) and not os.path.isfile(path):  # /dev/zero, a FIFO: reading would never end
        raise GraphInputError(f"graph path {path!r} is not a regular file or a SavedModel directory; "
                              "give a .pb/.pbtxt/.meta file or a SavedModel directory")
    if os.path.isdir(path):
        for name in ("saved_model.pb", "saved_model.pbtxt"):
            candidate = os.path.join(path, name)
            if os.path.exists(candidate):
                saved = _parse(candidate, saved_model_pb2.SavedModel())
                return _from_saved_model(saved, f"SavedModel {path!r}")
        raise GraphInputError(
            f"directory {path!r} is not a SavedModel (no saved_model.pb): pass a SavedModel "
            "directory or a graph file")
    if path.endswith(".meta"):
        meta = _parse(path, meta_graph_pb2.MetaGraphDef())
        return meta.graph_def, _meta_graph_fetches(meta)
    if os.path.basename(path) in ("saved_model.pb", "saved_model.pbtxt"):
        return _from_saved_model(_parse(path, saved_model_pb2.SavedModel()), f"SavedModel {path!r}")
    errors = []
    for kind in (graph_pb2.GraphDef, meta_graph_pb2.MetaGraphDef):
        try:
            parsed = _parse(path, kind())
        except GraphInputError as err:
            errors.append(str(err))
            continue
        if isinstance(parsed, graph_pb2.GraphDef) and _plausible(parsed):
            if not path.endswith((".pbtxt", ".txt")) and not parsed.HasField("versions"):
                raise GraphInputError(
                    f"graph file {path!r} holds {len(parsed.node)} nodes but no versions record, which TensorFlow "
                    "writes after the nodes of every GraphDef: the file looks truncated. Write it again (a graph "
                    "built by hand needs graph_def.versions.producer set)")
            return parsed, []
        if isinstance(parsed, meta_graph_pb2.MetaGraphDef) and _plausible(parsed.graph_def):
            return parsed.graph_def, _meta_graph_fetches(parsed)
    detail = f" ({errors[0]})" if errors else ""
    raise GraphInputError(
        f"{path!r} is neither a GraphDef nor a MetaGraphDef{detail}: pass a .pb/.pbtxt GraphDef, "
        "a .meta MetaGraphDef or a SavedModel directory")


def _plausible(graph_def: graph_pb2.GraphDef) -> bool:
    return bool(graph_def.node) and all(node.name and node.op for node in graph_def.node)


def _parse(path: str, proto):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise GraphInputError(f"cannot read graph file {path!r}: {err.strerror}; check its permissions") from None
    try:
        if path.endswith((".pbtxt", ".txt")):
            text_format.Parse(data.decode("utf-8"), proto)
        else:
            proto.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as err:
        raise GraphInputError(f"cannot parse {path!r} as {type(proto).__name__}: {err}") from None
    return proto
