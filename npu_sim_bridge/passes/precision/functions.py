"""Functional control flow: the bodies of While/If/Case and function calls are rewritten in the library.

A functional op keeps its signature dtypes (loop-carried values and branch results stay as the script
wrote them, so the op and its callers need no change); the ops inside its body functions get the same
decisions and Casts as ops of the main graph. Inside a body, the function's arguments are sources (they
do not decide) and its results keep the signature dtype: a result produced in float16 gets a Cast back.
Nested bodies are rewritten too. A function whose signature is parametrized by type attrs is left as
it is, with a report warning.

(In a Session, TensorFlow lowers functional While/If to v1 frames before Grappler runs, so this path
serves offline rewrites and Grappler's function items.)
"""

from __future__ import annotations

from tensorflow.core.framework import graph_pb2, node_def_pb2

from npu_sim_bridge.graph.attr_names import XLA_COMPILE_ATTR, XLA_MUST_COMPILE_ATTR
from npu_sim_bridge.graph.names import TensorRef, parse_input
from npu_sim_bridge.graph.ports import called_by
from npu_sim_bridge.graph.op_categories import CALLING_OPS
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.precision import marks, ports


_XLA_ATTRS = (XLA_MUST_COMPILE_ATTR, XLA_COMPILE_ATTR)


def _compiled(attrs) -> bool:
    return any(key in attrs and attrs[key].b for key in _XLA_ATTRS)


class LibraryScan:
    """What the precision pass needs to know of the graph's functions, from one sweep over the nodes
    of the graph and of every library function: the settings an earlier run recorded on them, the
    functions each calls (op type, or a func attr of a control-flow or call op), and those a call
    node marks for XLA."""

    def __init__(self, nodes, functions, alike=None):
        """`alike`: {function name: alike key} (PassContext.alike_bodies), when the caller has them: of
        functions with equal keys only the first is swept (their nodes, attrs and calls are the same)."""
        self.functions = functions
        self.marks: set[str] = set()   # settings recorded by an earlier run ('mode:execution')
        self._calls: dict[str | None, list[str]] = {}  # None: the graph; else a function's name
        self._marked: set[str] = set()  # functions a call node marks for XLA
        self._sweep(None, nodes)
        alike = alike or {}
        swept: dict[bytes, str] = {}  # alike key -> the function swept for it
        for name, fdef in functions.items():
            key = alike.get(name)
            first = swept.get(key) if key is not None else None
            if first is not None:
                self._calls[name] = list(self._calls[first])
                continue
            if key is not None:
                swept[key] = name
            self._sweep(name, fdef.node_def)

    def _sweep(self, owner: str | None, nodes) -> None:
        functions, found = self.functions, {}
        for node in nodes:
            op, attrs = node.op, node.attr
            if marks.PRECISION_ATTR in attrs:
                self.marks.add(attrs[marks.PRECISION_ATTR].s.decode())
            if op not in CALLING_OPS and op not in functions:
                continue
            calls = called_by(node, functions)
            if op not in CALLING_OPS:
                calls = calls[:1]  # a function called by name: its own attrs name no other call
            calls = [name for name in calls if name in functions]
            found.update(dict.fromkeys(calls))
            if _compiled(attrs):  # only a call can mark what it calls
                self._marked.update(calls)
        self._calls[owner] = list(found)

    def reachable(self) -> list[str]:
        """Every library function the graph calls, directly or from other function bodies, first seen first."""
        order = list(self._calls[None])
        seen = set(order)
        position = 0
        while position < len(order):
            for name in self._calls[order[position]]:
                if name not in seen:
                    seen.add(name)
                    order.append(name)
            position += 1
        return order

    def xla_compiled(self) -> set[str]:
        """The functions XLA compiles: those marked for it (`tf.function(jit_compile=True)`, as Keras's
        grouped convolutions are), those a call node marks, and every function they call in turn."""
        compiled = {name for name, fdef in self.functions.items() if _compiled(fdef.attr)} | self._marked
        order = list(compiled)
        while order:
            for name in self._calls[order.pop()]:
                if name not in compiled:
                    compiled.add(name)
                    order.append(name)
        return compiled


def is_parametrized(fdef) -> bool:
    signature = fdef.signature  # (read once: each read of a protobuf field makes a new wrapper)
    return any(a.type_attr or a.type_list_attr or a.number_attr
               for args in (signature.input_arg, signature.output_arg) for a in args)


class FunctionBody:
    """A FunctionDef as a GraphDef (arguments become _Arg nodes, inputs use flat ports) and back."""

    def __init__(self, fdef, functions):
        self.fdef = fdef
        self.functions = functions
        self.args = [arg.name for arg in fdef.signature.input_arg]
        self.graph_def = graph_pb2.GraphDef()
        for index, arg in enumerate(fdef.signature.input_arg):
            node = self.graph_def.node.add(name=arg.name, op="_Arg")
            node.attr["T"].type = arg.type
            node.attr["index"].i = index
        nodes = {node.name: node for node in fdef.node_def}
        self._sigs: dict[str, ports.Signature] = {}
        for source in fdef.node_def:
            node = self.graph_def.node.add()
            node.CopyFrom(source)
            del node.input[:]
            node.input.extend(self._flat(text, nodes) for text in source.input)
        # In the signature's order: a protobuf map's own order differs between processes, and the Casts
        # on the results are added in this order.
        ret = fdef.ret
        self.results = {arg.name: parse_input(self._flat(ret[arg.name], nodes))
                        for arg in fdef.signature.output_arg if arg.name in ret}

    def _sig(self, node) -> ports.Signature:
        sig = self._sigs.get(node.name)
        if sig is None:
            sig = self._sigs[node.name] = ports.signature(node, self.functions)
        return sig

    def _flat(self, text: str, nodes) -> str:
        if text.startswith("^"):
            return text
        parts = text.split(":")
        if len(parts) == 1:
            return text
        if len(parts) == 3 and parts[0] in nodes:
            offset = self._sig(nodes[parts[0]]).output_offset(parts[1])
            if offset is not None:
                position = offset + int(parts[2])
                return parts[0] if position == 0 else f"{parts[0]}:{position}"
        return text

    def result_dtypes(self) -> dict[str, int]:
        return {arg.name: arg.type for arg in self.fdef.signature.output_arg}

    def to_function(self, view: GraphView, results: dict[str, TensorRef]):
        """The FunctionDef of the rewritten body (signature, attrs and arg attrs unchanged)."""
        fdef = type(self.fdef)()
        fdef.CopyFrom(self.fdef)
        del fdef.node_def[:]
        nodes = {node.name: node for node in view.nodes()}
        self._sigs.clear()
        for node in view.nodes():
            if node.name in self.args and node.op == "_Arg":
                continue
            copy = node_def_pb2.NodeDef()
            copy.CopyFrom(node)
            del copy.input[:]
            copy.input.extend(self._nested(text, nodes) for text in node.input)
            fdef.node_def.append(copy)
        for key, ref in results.items():
            fdef.ret[key] = self._nested(f"{ref.node}:{ref.port}" if ref.port else ref.node, nodes)
        return fdef

    def _nested(self, text: str, nodes) -> str:
        if text.startswith("^"):
            return text
        ref = parse_input(text)
        if ref.node in self.args or ref.node not in nodes:
            return ref.node
        outputs = self._sig(nodes[ref.node]).outputs
        if ref.port < len(outputs):
            port = outputs[ref.port]
            return f"{ref.node}:{port.arg}:{port.index}"
        return text
