"""The CPU layout's second step: Transposes between laid-out ops cancel, and element-wise ops between them run
channels-last, so a chain of laid-out ops keeps its activations NHWC (NDHWC) from one op to the next.

After rewrite.py, each laid-out op O reads its activations through Transposes to the target layout
(O/npu_sim_layout/input_<i>) and gives its source-layout output under its own name, a Transpose back.
This step works on one scope (the graph, or one function body) and knows, per tensor, where its
target-layout twin is (`Scope.twins`: a laid-out op's output -> its .../nhwc node's output):

  cancel  an input Transpose reading a tensor with a twin: its reader reads the twin instead, and the
          Transpose (and a permutation Const nobody reads any more) is removed;
  follow  an element-wise op E of FOLLOWS placed on the CPU whose activation inputs all have twins, and
          one of whose readers would cancel (directly or through more such ops): E runs in the target
          layout as E/npu_sim_layout/nhwc on the twins, and E becomes, under its name, the Transpose
          of that node's output back (its twin, for its readers to cancel in turn).

Names are kept as rewrite.py keeps them: every op of the model still gives its source-layout value under
its name (fetches, dumps and the report read it there), a Transpose TensorFlow prunes when nothing reads
it; control inputs on such a Transpose move to the node it transposes. Only ops whose every output
element is computed from the same input elements in either layout follow (element-wise ops; BiasAdd,
which adds the same bias to each element): their values are bit-identical. Reductions (BiasAddGrad,
Mean, ...) stay where they are, as does a binary op with an operand that has no twin (its broadcast
could differ by layout).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tensorflow.core.framework import node_def_pb2
from tensorflow.python.framework import op_def_registry

from npu_sim_bridge.passes.layout.rewrite import SCOPE, dtype_of, transpose_node

# Element-wise ops that follow a laid-out op into the target layout: op -> the data input ports that carry
# activations (every one needs a twin). BiasAdd's bias is per channel and follows with its data_format.
# Only ops made of correctly rounded operations (compare, select, add, multiply, divide, square root, a
# Cast): a kernel's vector loop and its scalar tail give one element the same bits, wherever the layout
# puts it. Transcendental ones (Exp, Tanh, Sigmoid, Elu, Rsqrt, ...) and gradients Eigen may compute
# with fused multiply-adds in the vector loop only (SigmoidGrad, TanhGrad) stay where they are.
_UNARY = ("Relu", "Relu6", "LeakyRelu", "Identity", "Snapshot", "Cast", "Neg", "Abs", "Square", "Sqrt",
          "NpuSimRoundToFloat16")
_BINARY = ("ReluGrad", "Relu6Grad", "LeakyReluGrad", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum",
           "Minimum", "SquaredDifference")
FOLLOWS: dict[str, tuple[int, ...] | None] = {
    **{op: (0,) for op in _UNARY}, **{op: (0, 1) for op in _BINARY},
    "AddN": None,  # every input
    "BiasAdd": (0,),
}


_PRUNED = ("Transpose", "IdentityN", "Const", "DataFormatVecPermute")


@dataclasses.dataclass(frozen=True)
class Twin:
    """The target-layout twin of a source-layout tensor: its input text, and the permutation Const back."""

    tensor: str
    perm_out: str  # the name of a Const holding the permutation from target to source layout
    rank: int


@dataclasses.dataclass
class Scope:
    """One graph or function body being edited: its nodes by name, how an input names an output
    (`ref(name, output_arg, port)`), where a node runs (`on_cpu(node)`), the names taken, the twins (by
    the input text readers use), and the names of the nodes the first step added (`inserted`). The step
    records what it did: outputs renamed (a function's results follow them), ops that followed, nodes
    added, removed and edited."""

    nodes: dict[str, node_def_pb2.NodeDef]
    ref: Callable[[str, str, int], str]
    on_cpu: Callable[[node_def_pb2.NodeDef], bool]
    taken: set[str]
    twins: dict[str, Twin]
    inserted: set[str]
    forwards: dict[str, str] = dataclasses.field(default_factory=dict)  # IdentityN outputs -> what they forward
    renamed: dict[str, str] = dataclasses.field(default_factory=dict)
    followed: dict[str, str] = dataclasses.field(default_factory=dict)  # op -> its target-layout node
    added: list[str] = dataclasses.field(default_factory=list)
    removed: set[str] = dataclasses.field(default_factory=set)
    edited: set[str] = dataclasses.field(default_factory=set)
    cancelled: int = 0

    def twin(self, text: str) -> Twin | None:
        found = self.twins.get(text)
        if found is None and text.endswith(":0"):  # a graph's "name:0" is "name"
            found = self.twins.get(text[:-2])
        return found


def _producer(text: str) -> str:
    return text.lstrip("^").split(":", 1)[0]


def readers_of(scope: Scope) -> dict[str, list[tuple[str, int]]]:
    """{producer name: [(reader, input position)]}, control inputs included."""
    found: dict[str, list[tuple[str, int]]] = {}
    for name, node in scope.nodes.items():
        for position, text in enumerate(node.input):
            found.setdefault(_producer(text), []).append((name, position))
    return found


def is_input_transpose(scope: Scope, name: str) -> bool:
    return (name in scope.inserted and scope.nodes[name].op == "Transpose"
            and name.rpartition("/")[2].startswith("input_"))


def _activation_ports(node) -> list[int]:
    ports = FOLLOWS[node.op]
    count = sum(1 for text in node.input if not text.startswith("^"))
    return list(range(count)) if ports is None else [port for port in ports if port < count]


def _twin_inputs(scope: Scope, node) -> list[Twin] | None:
    """The twins of `node`'s activation inputs, or None where one has none (or they differ in rank)."""
    data = [text for text in node.input if not text.startswith("^")]
    twins = [scope.twin(data[port]) for port in _activation_ports(node)]
    if not twins or any(twin is None for twin in twins) or len({twin.rank for twin in twins}) != 1:
        return None
    return twins


def can_follow(scope: Scope, node) -> bool:
    if node.op not in FOLLOWS or not scope.on_cpu(node):
        return False
    if node.op == "BiasAdd" and node.attr["data_format"].s != b"NCHW":
        return False  # channels-last already (the default): its bias is on the last axis
    op_def = op_def_registry.get(node.op)
    return (op_def is not None and len(op_def.output_arg) == 1 and not op_def.output_arg[0].number_attr
            and dtype_of(node, op_def.output_arg[0]) is not None)


def wanted(scope: Scope, readers, name: str, memo: dict[str, bool]) -> bool:
    """Whether some data reader of `name`'s output would read its twin: an input Transpose, or
    (transitively) an op that can follow."""
    if name not in memo:
        memo[name] = False  # v1 loops: a cycle decides nothing through itself
        memo[name] = any(
            not scope.nodes[reader].input[position].startswith("^") and (
                is_input_transpose(scope, reader) or (can_follow(scope, scope.nodes[reader])
                                                       and wanted(scope, readers, reader, memo)))
            for reader, position in readers.get(name, []))
    return memo[name]


def _cancel(scope: Scope, readers) -> bool:
    """Every input Transpose whose input has a twin: its readers read the twin. Returns whether one did."""
    changed = False
    for name in [name for name in scope.nodes if is_input_transpose(scope, name)]:
        twin = scope.twin(scope.nodes[name].input[0])
        if twin is None:
            continue
        output = scope.ref(name, "y", 0)
        for reader, position in readers.get(name, []):
            if scope.nodes[reader].input[position] == output:
                scope.nodes[reader].input[position] = twin.tensor
                scope.edited.add(reader)
        del scope.nodes[name]
        scope.removed.add(name)
        scope.cancelled += 1
        changed = True
    return changed


def _follow(scope: Scope, readers, name: str, twins: list[Twin]) -> None:
    """Run `name` in the target layout on its inputs' twins; its name gives the Transpose back."""
    node = scope.nodes[name]
    output_arg = op_def_registry.get(node.op).output_arg[0]
    running = node_def_pb2.NodeDef()
    running.CopyFrom(node)
    base, count = f"{name}/{SCOPE}/{'nhwc' if twins[0].rank == 4 else 'ndhwc'}", 1
    running.name = base
    while running.name in scope.taken:
        running.name, count = f"{base}_{count}", count + 1
    scope.taken.add(running.name)
    data_positions = [position for position, text in enumerate(node.input) if not text.startswith("^")]
    for port, twin in zip(_activation_ports(node), twins):
        running.input[data_positions[port]] = twin.tensor
    if node.op == "BiasAdd":
        running.attr["data_format"].s = b"NHWC"  # BiasAdd's channels-last format, for 4D and 5D alike
    tensor = scope.ref(running.name, output_arg.name, 0)
    scope.nodes[name] = transpose_node(name, tensor, scope.ref(twins[0].perm_out, "output", 0), node.device,
                                       dtype_of(node, output_arg))
    scope.nodes[running.name] = running
    scope.added.append(running.name)
    scope.followed[name] = running.name
    scope.edited.add(name)
    old, new = scope.ref(name, output_arg.name, 0), scope.ref(name, "y", 0)
    if old != new:  # a function body names outputs by arg: the readers of a Relu's "activations" read "y"
        scope.renamed[old] = new
        for reader, position in readers.get(name, []):
            if scope.nodes[reader].input[position] == old:
                scope.nodes[reader].input[position] = new
                scope.edited.add(reader)
    scope.twins[new] = Twin(tensor, twins[0].perm_out, twins[0].rank)


def _finish(scope: Scope) -> None:
    """A reader of a laid-out batch norm's statistics (its IdentityN's other outputs) reads them where the
    IdentityN does, and a control input on a Transpose back (a laid-out or following op's name) waits
    for the node it transposes instead, so that the Transpose runs only where its value is read;
    permutation Consts nobody reads any more are removed."""
    transposed = {_producer(text): _producer(twin.tensor) for text, twin in scope.twins.items()}
    for name, node in scope.nodes.items():
        for position, text in enumerate(node.input):
            if text in scope.forwards:
                node.input[position] = scope.forwards[text]
                scope.edited.add(name)
        controls = [text for text in node.input if text.startswith("^")]
        if not any(text[1:] in transposed for text in controls):
            continue
        moved = []
        for text in controls:
            text = f"^{transposed[text[1:]]}" if text[1:] in transposed else text
            if text not in moved:
                moved.append(text)
        data = [text for text in node.input if not text.startswith("^")]
        del node.input[:]
        node.input.extend(data + moved)
        scope.edited.add(name)
    read = {_producer(text) for node in scope.nodes.values() for text in node.input}
    for name in [name for name in scope.inserted if name in scope.nodes and name not in read]:
        if scope.nodes[name].op == "Const":
            del scope.nodes[name]
            scope.removed.add(name)


def prune(scope: Scope, candidates: set[str], keep: set[str]) -> None:
    """Remove the Transposes, IdentityNs and permutation Consts of `candidates` (names the two steps made or
    turned into such nodes) that nothing reads, but those of `keep`, until none is left: TensorFlow runs
    every node of a function body, read or not."""
    readers = readers_of(scope)
    candidates = {name for name in candidates if name in scope.nodes and scope.nodes[name].op in _PRUNED}
    work = list(candidates)
    while work:
        name = work.pop()
        if name not in scope.nodes or name in keep or any(reader in scope.nodes for reader, _ in readers.get(name, [])):
            continue
        node = scope.nodes.pop(name)
        scope.removed.add(name)
        work.extend(_producer(text) for text in node.input if _producer(text) in candidates)


def chain(scope: Scope) -> None:
    """Cancel and follow (module docstring) until nothing changes."""
    changed = True
    while changed:
        changed = _cancel(scope, readers_of(scope))
        readers, memo = readers_of(scope), {}
        for name in list(scope.nodes):
            node = scope.nodes[name]
            if not can_follow(scope, node):
                continue
            twins = _twin_inputs(scope, node)
            if twins is not None and wanted(scope, readers, name, memo):
                _follow(scope, readers, name, twins)
                readers[scope.added[-1]] = [(name, 0)]
                changed = True
    _finish(scope)
