"""A fused MatMul in a GeOp body placed on a CPU runs as its MatMul, BiasAdd (and Relu), where oneDNN gives
the two forms the same bits.

The fusion rules (rules.py) turn MatMul -> BiasAdd (-> Relu) into _FusedMatMul, as the NPU's graph engine
fuses them, and the precision pass rounds the fused node's output once, as the NPU does. On a CPU,
TensorFlow runs that node as oneDNN's _MklNativeFusedMatMul, which costs more than the pair for the small
matrices of a training step (0.87-0.92x apart, in graphs of a hundred 16x32 by 32x64 or 4x96 by 96x128
products). Steps of a millisecond feel it: under npu_config_proto, whose plain graph runs the pair
(Grappler's remapper off), lstm_v1's steady step took 1.23x the plain one fused and 1.11x apart, and
user_cond_mlp's 1.11x and 1.05x (benchmarks/bench_fused_matmul.py). The pair, oneDNN's _MklMatMul and
then BiasAdd (and Relu), gives the fused kernel's float32 bits when neither operand is transposed and
the weights are not a constant: on every shape of the benchmark's grid and of the tests
(tests/test_fused_matmul_apart.py, with a training step's losses), and on the whole model sweep's
losses (benchmarks/check_identical.py --parts float32).

So, after every other pass, each such node of a function body placed on a CPU becomes the ops it was made
of. The last one keeps the fused node's name and attrs, so its readers (the rounding among them, a dump's
tap) read the same tensor; the report keeps the fused node, as the rules decided for the NPU. This is how
the CPU runs it, not a decision, and the pass record counts the nodes.

Left fused:
- a transposed operand: with transpose_a, oneDNN has no fused kernel and TensorFlow runs Eigen's, whose
  sums differ from oneDNN's MatMul; with transpose_b, oneDNN's two kernels differ at some shapes;
- constant weights (a frozen graph's): oneDNN then keeps the fused kernel's weights reordered, and its
  sums differ from the MatMul's at some shapes. Weights a constant folds to count too: the function
  runtime folds a body's constants before oneDNN's rewrite sees it;
- TensorFlow without oneDNN (TF_ENABLE_ONEDNN_OPTS=0): Eigen's fused and unfused kernels sum in
  different orders;
- a node of the graph itself: Grappler's remapper may fuse the pair again in its next iteration (GeOp
  bodies are left to their calls), and the graph's fused nodes are rare (a MatMul left on the host);
- a node on a GPU, and a body nobody placed (an offline rewrite: the graph it gives is the NPU's).
"""

from __future__ import annotations

from tensorflow.core.framework import function_pb2, node_def_pb2

from npu_sim_bridge.graph.names import on_cpu
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult

FLOAT = 1  # DataType DT_FLOAT
# Each op of a fused node's list: the output arg its readers name in a function body.
OUTPUT_ARG = {"MatMul": "product", "BiasAdd": "output", "Relu": "activations"}
APART_LISTS = (("BiasAdd",), ("BiasAdd", "Relu"))


def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs its CPU kernels through oneDNN (TF_ENABLE_ONEDNN_OPTS)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def runs_apart(node: node_def_pb2.NodeDef, producers: dict[str, node_def_pb2.NodeDef]) -> bool:
    """Whether `node`, of a function body whose nodes by name are `producers`, is a fused MatMul that runs
    as its ops on this CPU (see the module's text; oneDNN is checked by the caller). A Session's GeOp
    bodies keep their members' devices."""
    if node.op != "_FusedMatMul" or not on_cpu(node.device):
        return False
    attr = node.attr
    if attr["T"].type != FLOAT or attr["transpose_a"].b or attr["transpose_b"].b:
        return False
    if tuple(item.decode() for item in attr["fused_ops"].list.s) not in APART_LISTS:
        return False
    return len(node.input) > 1 and not _folds_to_constant(node.input[1], producers, MAX_DEPTH)


MAX_DEPTH = 16  # ops followed back from the weights; a longer chain counts as a constant (left fused)


def _folds_to_constant(text: str, producers: dict[str, node_def_pb2.NodeDef], depth: int) -> bool:
    """Whether the body tensor `text` ("node:arg:index", or an input arg's name) is a constant or made of
    constants only, as the function runtime's constant folding would find it."""
    node = producers.get(text.split(":", 1)[0])
    if node is None:  # an input arg of the body: a value of the step
        return False
    if node.op == "Const" or depth == 0:
        return True
    data = [item for item in node.input if not item.startswith("^")]
    return bool(data) and all(_folds_to_constant(item, producers, depth - 1) for item in data)


class FusedMatMulApartPass(GraphPass):
    name = "matmul_apart"
    description = ("a fused MatMul of a GeOp body placed on a CPU runs as MatMul, BiasAdd (and Relu): the same "
                   "bits with oneDNN, and cheaper for small matrices")

    def run(self, ctx: PassContext) -> PassResult:
        if not onednn_enabled():
            return PassResult(False)
        apart = sum(_take_apart(function) for function in ctx.view.graph_def.library.function
                    if any(node.op == "_FusedMatMul" for node in function.node_def))
        return PassResult(bool(apart), {"fused_matmuls_apart": apart} if apart else {})


def _take_apart(function: function_pb2.FunctionDef) -> int:
    """Take apart each fused MatMul of `function` that runs apart; returns how many."""
    producers = {node.name: node for node in function.node_def}
    taken = set(producers) | {arg.name for arg in function.signature.input_arg}
    renamed: dict[str, str] = {}
    for index in range(len(function.node_def)):
        node = function.node_def[index]
        if not runs_apart(node, producers):
            continue
        chain = _chain(node, taken)
        renamed[f"{node.name}:product:0"] = f"{node.name}:{OUTPUT_ARG[chain[-1].op]}:0"
        function.node_def[index].CopyFrom(chain[-1])
        for new in chain[:-1]:
            function.node_def.add().CopyFrom(new)
    if not renamed:
        return 0
    for node in function.node_def:
        for position, text in enumerate(node.input):
            if text in renamed:
                node.input[position] = renamed[text]
    for key, text in list(function.ret.items()):
        if text in renamed:
            function.ret[key] = renamed[text]
    return len(renamed)


def _chain(fused: node_def_pb2.NodeDef, taken: set[str]) -> list[node_def_pb2.NodeDef]:
    """The MatMul, BiasAdd (and Relu) `fused` stands for, in order; the last has its name, attrs and
    control inputs, the others new names not in `taken` (which gets them)."""
    data = [text for text in fused.input if not text.startswith("^")]
    ops = ["MatMul"] + [item.decode() for item in fused.attr["fused_ops"].list.s]
    chain = []
    for position, op in enumerate(ops):
        last = position == len(ops) - 1
        node = node_def_pb2.NodeDef(name=fused.name if last else _new_name(f"{fused.name}/{op}", taken), op=op,
                                    device=fused.device)
        if op == "MatMul":
            node.input.extend(data[:2])
            for key in ("transpose_a", "transpose_b"):
                node.attr[key].CopyFrom(fused.attr[key])
        else:
            node.input.append(f"{chain[-1].name}:{OUTPUT_ARG[chain[-1].op]}:0")
        if op == "BiasAdd":
            node.input.append(data[2])
            node.attr["data_format"].s = b"NHWC"
        node.attr["T"].CopyFrom(fused.attr["T"])
        if last:
            node.input.extend(text for text in fused.input if text.startswith("^"))
            for key, value in fused.attr.items():
                if key.startswith("_"):  # the simulator's marks (fusion, precision, stamp), TensorFlow's class
                    node.attr[key].CopyFrom(value)
        chain.append(node)
    return chain


def _new_name(base: str, taken: set[str]) -> str:
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(name)
    return name
