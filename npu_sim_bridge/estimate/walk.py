"""Walks a rewritten graph: the nodes one step runs, each GeOp's body (and the functions it calls), every op's work."""

from __future__ import annotations

import dataclasses
import functools

from npu_sim_bridge.estimate import ops as families
from npu_sim_bridge.estimate.dtypes import FLOAT_TYPES, main_dtype, width, width_of_attr, width_of_name
from npu_sim_bridge.estimate.ops import AICPU, CUBE, FREE, HOST, VECTOR, OpCall, Work
from npu_sim_bridge.graph.attr_names import GEOP_ATTR
from npu_sim_bridge.graph.names import node_name
from npu_sim_bridge.graph.op_categories import CALL_OPS

BRANCHES = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})
LOOPS = frozenset({"While", "StatelessWhile"})
V1_LOOP = frozenset({"Enter", "Exit", "NextIteration", "LoopCond"})
PY_FUNCS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


@dataclasses.dataclass
class OpRecord:
    """One op of the step with its work: where it runs (geop, or None on the host) and its dtype width."""

    name: str
    op: str
    geop: str | None
    work: Work
    width: int
    dtype: str | None
    calls: int = 1         # runs per step (1; inside a loop of unknown trip count, still counted once)


@dataclasses.dataclass
class Boundary:
    """A tensor crossing between host and device at a GeOp: its GeOp, direction and bytes."""

    geop: str
    direction: str  # "in" (host to device) or "out"
    tensor: str
    nbytes: float
    fed: bool = False  # the host side is a placeholder or a dataset's GetNext (the step's input data)


@dataclasses.dataclass
class Walked:
    """What one step runs: its ops, the GeOps in order, the boundary copies, the host ops between GeOps, and
    the dynamic parts (loops of unknown trip count, ops with unknown shapes)."""

    ops: list
    geops: list
    boundaries: list
    splitters: list
    loops: list


def step_nodes(graph_def, fetches) -> list:
    """The outer graph's nodes one Session.run of `fetches` runs (every node when nothing is fetched)."""
    by_name = {node.name: node for node in graph_def.node}
    roots = [node_name(f) for f in fetches if node_name(f) in by_name]
    if not roots:
        return list(graph_def.node)
    seen, stack = set(roots), list(roots)
    while stack:
        for inp in by_name[stack.pop()].input:
            name = node_name(inp)
            if name in by_name and name not in seen:
                seen.add(name)
                stack.append(name)
    return [node for node in graph_def.node if node.name in seen]


class Walker:
    """Costs the ops of a rewritten graph (see `walk`)."""

    def __init__(self, graph_def, shapes, decisions, library, hw, batch):
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.shapes, self.decisions, self.library, self.hw, self.batch = shapes, decisions, library, hw, batch
        self.records: list[OpRecord] = []
        self.loops: list[str] = []

    # ----------------------------------------------------------------- units
    def unit(self, node, on_device: bool) -> str:
        op = node.op
        if op in families.NO_KERNEL or "/NpuSimRound_" in node.name or op.startswith("NpuSim"):
            return FREE
        if not on_device:
            return HOST
        if op in families.MATMUL or op in families.BATCH_MATMUL or op in families.CONV:
            return CUBE
        if op in self.hw.aicpu_era_ops:
            return AICPU
        if self.library.not_compute_kind(op) is not None:
            return FREE
        if self.library.info(op) is not None or op.startswith("_Fused"):
            return VECTOR
        return AICPU

    # ----------------------------------------------------------------- bodies
    def body(self, fname: str, geop: str, arg_shapes=(), outer_names: bool = False, depth: int = 0):
        """Cost every op of function `fname` run by `geop`; returns {tensor: shape} resolver of its nodes."""
        fn = self.functions.get(fname)
        if fn is None or depth > 20:
            return None
        args = {a.name: (arg_shapes[i] if i < len(arg_shapes) else None, a.type)
                for i, a in enumerate(fn.signature.input_arg)}
        nodes = {n.name: n for n in fn.node_def}
        resolver = _Resolver(nodes, args, self.shapes if outer_names else {})
        for node in fn.node_def:
            self.node(node, geop, resolver, depth)
        return resolver

    def node(self, node, geop, resolver, depth):
        op = node.op
        if op in CALL_OPS and "f" in node.attr:
            self.body(node.attr["f"].func.name, geop, resolver.inputs(node), depth=depth + 1)
            return
        if op in BRANCHES:
            self.branches(node, geop, resolver, depth)
            return
        if op in LOOPS:
            self.loops.append(f"{node.name} ({op}: trip count unknown before it runs, counted once)")
            self.body(node.attr["body"].func.name, geop, resolver.inputs(node), depth=depth + 1)
            return
        if op in V1_LOOP and op == "LoopCond":
            self.loops.append(f"{node.name} (v1 while loop: trip count unknown before it runs, counted once)")
        self.records.append(self.record(node, geop, resolver.inputs(node), resolver.outputs(node),
                                        resolver.input_widths(node)))

    def branches(self, node, geop, resolver, depth):
        keys = ("then_branch", "else_branch") if "then_branch" in node.attr else ()
        names = [node.attr[k].func.name for k in keys] or [f.name for f in node.attr["branches"].list.func]
        shapes = resolver.inputs(node)[1:]
        best = None
        for name in names:
            start = len(self.records)
            self.body(name, geop, shapes, depth=depth + 1)
            taken = self.records[start:]
            del self.records[start:]
            cost = sum(r.work.flops + r.work.bytes for r in taken)
            if best is None or cost > best[0]:
                best = (cost, taken)
        self.records.extend(best[1] if best else [])  # the costlier branch: what a training step takes

    # ----------------------------------------------------------------- one op
    def record(self, node, geop, in_shapes, out_shapes, in_widths) -> OpRecord:
        unit = self.unit(node, geop is not None)
        dtype, w = self.dtype(node)
        call = OpCall(node.op, node.attr, in_shapes, out_shapes, w, in_widths, self.batch)
        if unit == FREE:
            work = Work(FREE, static=True)
        elif unit == CUBE:
            work = families.cube_work(call)
            if w >= 4 and dtype in (None, "float32"):
                work.fp32_cube = True
                work.convert_elements = sum(families.elements(s, self.batch) for s in in_shapes[:2] + out_shapes[:1])
        elif unit == VECTOR:
            work = families.vector_work(call)
        else:
            work = families.generic_work(call, unit)
        return OpRecord(node.name, node.op, geop, work, w, dtype)

    def dtype(self, node):
        decision = self.decisions.get(node.name) if self.decisions is not None else None
        after = getattr(decision, "dtype_after", None) if decision is not None else None
        if after in ("float16", "float32", "bfloat16"):
            return after, width_of_name(after)
        if any("NpuSimRound_" in i and i.split(":")[0].endswith("float16") for i in node.input):
            return "float16", 2
        dtype = main_dtype(node.attr)
        if dtype in FLOAT_TYPES:
            return {1: "float32", 19: "float16", 14: "bfloat16", 2: "float64"}.get(dtype), width(dtype)
        return None, width(dtype) if dtype is not None else 4


class _Resolver:
    """Shapes and widths of a function body's tensors: the body's own _output_shapes, the outer graph's
    inferred shapes (GeOp bodies keep the original names), or the input's shape for a Cast."""

    def __init__(self, nodes, args, outer):
        self.nodes, self.args, self.outer = nodes, args, outer

    def outputs(self, node) -> list:
        inferred = self.outer.get(node.name)
        if inferred is not None and (node.op != "Cast" or "NpuSim" not in node.name):
            return inferred
        if "_output_shapes" in node.attr:
            return [None if s.unknown_rank else [d.size for d in s.dim]
                    for s in node.attr["_output_shapes"].list.shape]
        if node.op in ("Cast", "NpuSimRoundToFloat16", "Identity", "Relu", "Neg") and node.input:
            return [self.tensor(node.input[0])]
        return [None]

    def inputs(self, node) -> list:
        return [self.tensor(i) for i in node.input if not i.startswith("^")]

    def input_widths(self, node) -> list:
        result = []
        for name in node.input:
            if name.startswith("^"):
                continue
            head = name.split(":")[0]
            producer = self.nodes.get(head)
            if head in self.args:
                result.append(width(self.args[head][1]))
            elif producer is not None and producer.op in ("VarHandleOp", "_Arg"):
                result.append(0)
            elif producer is not None and producer.op == "Cast" and "NpuSimRound_" not in head:
                result.append(width_of_attr(producer.attr, "DstT"))
            else:
                result.append(None)
        return result if any(w is not None for w in result) else None

    def tensor(self, name: str):
        parts = name.split(":")
        head = parts[0]
        if head in self.args:
            return self.args[head][0]
        node = self.nodes.get(head)
        if node is None:
            return None
        shapes = self.outputs(node)
        index = _flat_index(node, parts[1], int(parts[2])) if len(parts) == 3 else 0
        return shapes[index] if 0 <= index < len(shapes) else None


@functools.lru_cache(maxsize=None)
def _output_args(op: str):
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op)
    return tuple((a.name, a.number_attr, a.type_list_attr) for a in op_def.output_arg) if op_def else ()


def _flat_index(node, arg: str, index: int) -> int:
    offset = 0
    for name, number_attr, list_attr in _output_args(node.op):
        if name == arg:
            return offset + index
        if number_attr:
            offset += node.attr[number_attr].i
        elif list_attr:
            offset += len(node.attr[list_attr].list.type)
        else:
            offset += 1
    return index


def walk(graph_def, fetches, shapes, decisions, library, hw, batch) -> Walked:
    """Every op one step of `fetches` runs, with its work; GeOp bodies costed op by op."""
    walker = Walker(graph_def, shapes, decisions, library, hw, batch)
    nodes = step_nodes(graph_def, fetches)
    by_name = {node.name: node for node in graph_def.node}
    outer = _Resolver(by_name, {}, shapes)
    geops, boundaries, resolvers = [], [], {}
    for node in nodes:
        if GEOP_ATTR in node.attr and "f" in node.attr:
            geops.append(node.name)
            resolvers[node.name] = walker.body(node.attr["f"].func.name, node.name, outer.inputs(node),
                                               outer_names=True)
            for inp in node.input:
                producer = by_name.get(node_name(inp))
                if inp.startswith("^") or producer is None or producer.op in ("VarHandleOp", "Const"):
                    continue
                nbytes = families.elements(outer.tensor(inp), batch) * width(main_dtype(producer.attr) or 1)
                if nbytes:
                    fed = producer.op in ("Placeholder", "PlaceholderWithDefault", "IteratorGetNext")
                    boundaries.append(Boundary(node.name, "in", inp, float(nbytes), fed))
        else:
            walker.node(node, None, outer, 0)
    step = {node.name for node in nodes}
    splitters = []
    wanted = {node_name(f): f for f in fetches}
    for geop in geops:
        fn = walker.functions[by_name[geop].attr["f"].func.name]
        used = set()
        for node in nodes:
            for inp in node.input:
                if node_name(inp) == geop and not inp.startswith("^") and GEOP_ATTR not in node.attr:
                    used.add(_port(inp))
                    if node.op not in families.NO_KERNEL:
                        splitters.append(node.name)
        if geop in wanted and ":" in wanted[geop]:
            used.add(_port(wanted[geop]))
        for port in sorted(used):
            if port >= len(fn.signature.output_arg):
                continue
            arg = fn.signature.output_arg[port]
            ret = fn.ret.get(arg.name, "")
            resolver = resolvers.get(geop)
            shape = resolver.tensor(ret) if resolver is not None else None
            nbytes = families.elements(shape, batch) * width(arg.type)
            if nbytes:
                boundaries.append(Boundary(geop, "out", f"{geop}:{port}", float(nbytes)))
    feeds_geop = {node_name(i) for g in geops for i in by_name[g].input}
    consumers: dict = {}
    for name in step:
        for inp in by_name[name].input:
            consumers.setdefault(node_name(inp), []).append(name)
    splitters = sorted({s for s in splitters if s in step and _reaches(s, feeds_geop, by_name, consumers)})
    return Walked(walker.records, geops, boundaries, splitters, walker.loops)


def _port(name: str) -> int:
    parts = name.split(":")
    return int(parts[1]) if len(parts) > 1 else 0


def _reaches(start, targets, by_name, consumers) -> bool:
    """Whether a host node that reads a GeOp feeds (through host nodes) a GeOp input: it splits the graph.
    `consumers`: node name -> the step's nodes reading it (built once: a step may have hundreds of such nodes)."""
    seen, stack = {start}, [start]
    while stack:
        name = stack.pop()
        if name in targets:
            return True
        for nxt in consumers.get(name, ()):
            if nxt not in seen and GEOP_ATTR not in by_name[nxt].attr:
                seen.add(nxt)
                stack.append(nxt)
    return False
