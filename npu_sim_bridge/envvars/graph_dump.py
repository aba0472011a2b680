"""DUMP_GE_GRAPH / DUMP_GRAPH_LEVEL / DUMP_GRAPH_PATH: the graph at each pipeline stage, as CANN's graph engine dumps it.

Files are TensorFlow GraphDefs in protobuf text format, under the names CANN users look for:
  ge_proto_<seq:08d>_graph_<graph id>_<Stage>.txt      the whole graph at a stage
  ge_proto_<seq:08d>_graph_<GeOp name>_Build.txt       the body of each GeOp (the graph the NPU builds)
Stages: PreRunBegin (the graph NpuOptimizer got), After<Pass> after each pass that ran
(AfterFusion, AfterPlacement, AfterPrecision, AfterPartition, AfterDump), PreRunAfterBuild (the graph
it returned), then the GeOp bodies.

DUMP_GE_GRAPH: 1 everything; 2 without constant data (tensor values dropped, dtype and shape kept);
3 nodes and edges only (name, op, inputs, device). DUMP_GRAPH_LEVEL: 1 every stage; 2 (default) the
trustlisted ones: PreRunBegin, PreRunAfterBuild and the GeOp bodies; 3 the last graph (PreRunAfterBuild)
and the GeOp bodies; 4 the first (PreRunBegin); or names joined by `|`: the stages whose name
contains one of them. DUMP_GRAPH_PATH: the folder (created; default the working directory).

The pipeline keeps the stages `DumpRequest.wants` names (passes/pipeline.py); the publishing step
(report/publish.py) writes them with `DumpRequest.write` once the rewrite is done.
"""

from __future__ import annotations

import itertools
import os
import threading

from tensorflow.core.framework import graph_pb2

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.fileio import write_atomic
from npu_sim_bridge.graph.attr_names import GEOP_ATTR
from npu_sim_bridge.graph.inline import graph_input

FIRST, LAST, BUILD = "PreRunBegin", "PreRunAfterBuild", "Build"
_sequence = itertools.count()
_sequence_lock = threading.Lock()


def stage_name(pass_name: str) -> str:
    """'AfterPrecision' for the pass 'precision'."""
    return "After" + "".join(part.capitalize() for part in pass_name.split("_"))


class DumpRequest:
    """What DUMP_GE_GRAPH / DUMP_GRAPH_LEVEL / DUMP_GRAPH_PATH ask for: which stages, in how much detail, where."""

    def __init__(self, detail: int, level: str, directory: str):
        self.detail = detail
        self.level = level
        self.directory = directory

    def wants(self, stage: str) -> bool:
        if self.level == "1":
            return True
        if self.level == "2":
            return stage in (FIRST, LAST, BUILD)
        if self.level == "3":
            return stage in (LAST, BUILD)
        if self.level == "4":
            return stage == FIRST
        return any(part and part in stage for part in self.level.split("|"))

    def write(self, graph_id: str, stages, graph_def: graph_pb2.GraphDef) -> list[str]:
        """Write one rewrite's graphs: `stages` ((stage, serialized GraphDef) pairs, as the pipeline kept
        them), then the returned graph `graph_def`, then each GeOp's body as a graph of its own. Returns the
        paths written."""
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as err:
            raise ConfigError(f"environment variable DUMP_GRAPH_PATH={self.directory!r}: cannot create it ({err}); "
                              "point it at a writable folder") from err
        written: list[str] = []
        for stage, data in stages:
            if self.wants(stage):
                written.append(self._write(f"graph_{graph_id}_{stage}", graph_pb2.GraphDef.FromString(data)))
        if self.wants(LAST):
            written.append(self._write(f"graph_{graph_id}_{LAST}", graph_def))
        if not self.wants(BUILD):
            return written
        functions = {function.signature.name: function for function in graph_def.library.function}
        for node in graph_def.node:
            if GEOP_ATTR not in node.attr or "f" not in node.attr:
                continue
            body = functions.get(node.attr["f"].func.name)
            if body is not None:
                written.append(self._write(f"graph_{node.name}_{BUILD}", _body_graph(body, graph_def)))
        return written

    def _write(self, name: str, graph_def: graph_pb2.GraphDef) -> str:
        with _sequence_lock:
            number = next(_sequence)
        path = os.path.join(self.directory, f"ge_proto_{number:08d}_{name}.txt")
        try:
            write_atomic(path, str(_shaped(graph_def, self.detail)), what="graph dump")  # no 0-byte file on a full disk
        except OSError as err:
            raise ConfigError(f"environment variable DUMP_GRAPH_PATH={self.directory!r}: cannot write {path} "
                              f"({err}); point it at a writable folder") from err
        return path


def from_environment(environ=None) -> DumpRequest | None:
    """What DUMP_GE_GRAPH asks for, or None when graph dumps are off; an invalid value is a ConfigError."""
    environ = os.environ if environ is None else environ
    raw = environ.get("DUMP_GE_GRAPH", "").strip()
    if raw in ("", "0"):
        return None
    if raw not in ("1", "2", "3"):
        raise ConfigError(f"environment variable DUMP_GE_GRAPH={raw!r} is invalid; it should be 1 (full graph), "
                          "2 (without constant data) or 3 (nodes and edges only), or unset")
    level = environ.get("DUMP_GRAPH_LEVEL", "").strip() or "2"
    directory = os.path.abspath(environ.get("DUMP_GRAPH_PATH", "").strip() or os.getcwd())
    return DumpRequest(int(raw), level, directory)


def _shaped(graph_def: graph_pb2.GraphDef, detail: int) -> graph_pb2.GraphDef:
    if detail == 1:
        return graph_def
    shaped = graph_pb2.GraphDef()
    shaped.CopyFrom(graph_def)
    nodes = list(shaped.node) + [node for function in shaped.library.function for node in function.node_def]
    for node in nodes:
        if detail == 3:
            node.ClearField("attr")
        elif "value" in node.attr and node.attr["value"].HasField("tensor"):
            tensor = node.attr["value"].tensor
            kept = (tensor.dtype, tensor.tensor_shape.SerializeToString())
            tensor.Clear()
            tensor.dtype = kept[0]
            tensor.tensor_shape.ParseFromString(kept[1])
    if detail == 3:
        shaped.ClearField("library")
    return shaped


def _body_graph(function, graph_def: graph_pb2.GraphDef) -> graph_pb2.GraphDef:
    """A GeOp's FunctionDef as a GraphDef (its arguments as Placeholders), with the library it calls."""
    library = {f.signature.name: f for f in graph_def.library.function}
    members = {node.name: node for node in function.node_def}
    body = graph_pb2.GraphDef()
    body.versions.CopyFrom(graph_def.versions)
    for arg in function.signature.input_arg:
        placeholder = body.node.add(name=arg.name, op="Placeholder")
        placeholder.attr["dtype"].type = arg.type
    for node in function.node_def:
        copy = body.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(_input(text, members, library) for text in node.input)
    for arg in function.signature.output_arg:
        source = _input(function.ret[arg.name], members, library)
        result = body.node.add(name=f"retval/{arg.name}", op="Identity", input=[source])
        result.attr["T"].type = arg.type
    body.library.CopyFrom(graph_def.library)
    return body


def _input(text: str, members, library) -> str:
    converted = graph_input(text, members, library)
    return converted if converted is not None else text  # a function argument: its Placeholder
