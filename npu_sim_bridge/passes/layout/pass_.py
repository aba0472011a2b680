"""The CPU layout: channels-first ops placed on the CPU run channels-last there, in the graph and its functions.

The NPU prefers NCHW, so migrated scripts build NCHW and NCDHW graphs; TensorFlow's CPU kernels of the
convolutions and pools take NHWC/NDHWC only (ops.py lists them and what was measured). The pipeline runs
this pass after every other, whatever `sim_passes` selects: fusion, placement, precision and partition
decide on the graph as the script built it (as on the NPU, where the ops stay NCHW), and only then is
each such op placed on a CPU device laid out (rewrite.py) wherever it ended: in the graph, or in a
function body of its library (the GeOp bodies the partition pass made, a while loop's body, ...).
A second step (chains.py) then keeps chains of laid-out ops in the target layout: the Transposes
between them cancel, element-wise ops between them follow into that layout, a GeOp body returns such
a result in it where its caller's graph would transpose it again (boundary.py), and a body keeps no
Transpose nothing reads (TensorFlow runs every node of a function body; a graph is pruned to its fetches).

Which device: the node's own (Grappler hands a Session's graph placed, and the GeOp bodies keep their
members' devices); a body node without one runs where the nodes calling its function run. Nodes on a
GPU are left as they are (TensorFlow has NCHW GPU kernels), and so is a graph nobody placed (an offline
rewrite: where it will run is not known, and the graph it gives is the NPU's).

Grappler's own CPU layout conversion (`rewrite_options.cpu_layout_conversion = NCHW_TO_NHWC`) cannot do
this: it runs before NpuOptimizer (whose decisions would then be about a transposed graph the NPU never
sees), it skips nodes without a device and so every function body, and it leaves fetched nodes alone.
"""

from __future__ import annotations

from tensorflow.core.framework import function_pb2, node_def_pb2
from tensorflow.python.framework import op_def_registry

from npu_sim_bridge.graph.names import node_name, on_cpu, on_gpu
from npu_sim_bridge.graph.ports import called_by
from npu_sim_bridge.graph.view import GraphView
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.passes.layout import boundary, chains
from npu_sim_bridge.passes.layout.rewrite import SCOPE, LaidOut, first_activation, lay_out, resolvable
from npu_sim_bridge.passes.layout.ops import OPS, source_format
from npu_sim_bridge.report.reasons import Reason


class CpuLayoutPass(GraphPass):
    name = "layout"
    description = ("channels-first convolutions and pools placed on the CPU run channels-last between "
                   "Transposes (TensorFlow's CPU kernels take NHWC/NDHWC only)")

    def run(self, ctx: PassContext) -> PassResult:
        view, report = ctx.view, ctx.report
        laid: list[LaidOut] = []
        for name in [name for name in view.names_with_op_in(OPS) if source_format(view.node(name)) is not None]:
            node = view.node(name)
            if not on_cpu(node.device) or not resolvable(node):  # a graph's dtypes are always set
                continue
            done = lay_out(node, ref=_graph_ref, taken=view.__contains__, anchor=node_name(first_activation(node)))
            _apply(view, done)
            laid.append(done)
        graph_laid = list(laid)
        library = view.graph_def.library.function
        devices = None  # where each function runs: worked out for the first body that holds such an op
        bodies: dict[str, tuple] = {}
        for function in library:
            # The op test first: a call per body node was most of this scan (the bodies hold every GeOp's nodes).
            found = [index for index, node in enumerate(function.node_def)
                     if node.op in OPS and source_format(node) is not None]
            if not found:
                continue
            if devices is None:
                devices = _call_devices(view, library)
            device = devices.get(function.signature.name, "")
            body_laid, scope = _lay_out_body(function, found, device, report)
            if body_laid:
                laid.extend(body_laid)
                bodies[function.signature.name] = (function, scope, body_laid)
        scopes = [scope for _, scope, _ in bodies.values()]
        exported = 0
        if graph_laid or bodies:
            graph = _graph_scope(view, graph_laid)
            exported = boundary.export_results(graph, {name: entry[:2] for name, entry in bodies.items()}, library)
            if graph_laid or exported:
                chains.chain(graph)
                _store_graph(view, graph)
                scopes.append(graph)
                _record_all(report, "", graph_laid, graph)
        for name, (function, scope, body_laid) in bodies.items():
            _store_body(function, scope, body_laid)
            _record_all(report, name, body_laid, scope)
        cancelled = sum(scope.cancelled for scope in scopes)
        following = sum(len(scope.followed) for scope in scopes)
        stats = {"ops_laid_out": len(laid),
                 "transposes": sum(1 for done in laid for node in done.added if node.op == "Transpose")
                 + sum(1 for done in laid if done.transposed_back) - cancelled + following + exported,
                 "transposes_cancelled": cancelled, "ops_following": following, "results_exported": exported}
        return PassResult(bool(laid), stats if laid else {})


def _twins(laid: list[LaidOut], ref) -> dict[str, chains.Twin]:
    """{input text of a laid-out op's source-layout output: its twin} (`ref` names an op's output 0:
    the Transpose's "y", or the batch norm's IdentityN's "output")."""
    return {ref(done.replacement.name, "y" if done.replacement.op == "Transpose" else "output", 0):
            chains.Twin(done.twin, done.perm_out, len(done.source)) for done in laid if done.twin}


def _forwards(laid: list[LaidOut], port_ref) -> dict[str, str]:
    """{input text of a laid-out batch norm's output p >= 1 (its IdentityN's): the text the IdentityN reads}."""
    return {port_ref(done.replacement.name, port): text for done in laid if done.replacement.op == "IdentityN"
            for port, text in enumerate(done.replacement.input) if port and not text.startswith("^")}


def _graph_scope(view: GraphView, laid: list[LaidOut]) -> chains.Scope:
    """The graph as a scope of the second step (chains.py): copies of its nodes, stored back by _store_graph."""
    nodes = {}
    for node in view.nodes():
        nodes[node.name] = node_def_pb2.NodeDef()
        nodes[node.name].CopyFrom(node)
    scope = chains.Scope(nodes, _graph_ref, lambda node: on_cpu(node.device), set(nodes), _twins(laid, _graph_ref),
                         {node.name for done in laid for node in done.added},
                         _forwards(laid, lambda name, port: f"{name}:{port}"))
    return scope


def _store_graph(view: GraphView, scope: chains.Scope) -> None:
    for name in scope.added:
        view.add_node(scope.nodes[name])
    for name in scope.edited - scope.removed:
        _sync(view, scope.nodes[name])
    view.remove_nodes([name for name in scope.removed if name in view])


def _apply(view: GraphView, done: LaidOut) -> None:
    """Add the new nodes and turn the op, under its name, into its replacement."""
    for node in done.added:
        view.add_node(node)
    _sync(view, done.replacement)


def _sync(view: GraphView, new) -> None:
    """Make the view's node of `new`'s name what `new` is: op, inputs and attrs."""
    stored = view.node(new.name)
    if stored.op != new.op:
        view.set_op(new.name, new.op)
    for index in reversed(range(len(stored.input))):
        view.remove_input(new.name, index)
    for text in new.input:
        view.add_input(new.name, text)
    stored.attr.clear()
    for key, value in new.attr.items():
        stored.attr[key].CopyFrom(value)


def _warn_unresolved(report, node, function: str) -> None:
    report.warn(f"{node.name} ({node.op} in function {function}) runs {node.attr['data_format'].s.decode()} on the CPU, where "
                "TensorFlow has no kernel for it, and cannot be laid out: its dtypes are attrs the function is "
                "parametrized by; build it channels-last (data_format NHWC/NDHWC) or call the function with "
                "concrete dtypes")


def _lay_out_body(function: function_pb2.FunctionDef, found: list[int], call_device: str,
                  report) -> tuple[list[LaidOut], chains.Scope | None]:
    """Lay out the ops of one function body that run on a CPU (`found`: the positions of its channels-first
    ops), then run the second step (chains.py) on the body; readers of a transposed-back op's output (and
    the function's results) read the Transpose's output arg instead of the op's."""
    nodes = {node.name for node in function.node_def}
    taken = nodes | {arg.name for arg in function.signature.input_arg}
    renamed: dict[str, str] = {}
    laid = []
    for index in found:
        node = function.node_def[index]
        if not on_cpu(node.device or call_device):
            continue
        if not resolvable(node):
            _warn_unresolved(report, node, function.signature.name)
            continue
        output_args = _output_args(node)
        producer = first_activation(node).split(":", 1)[0]
        done = lay_out(node, ref=lambda name, arg, _port: f"{name}:{arg}:0", taken=taken.__contains__,
                       anchor=producer if producer in nodes else None)
        function.node_def[index].CopyFrom(done.replacement)
        for new in done.added:
            function.node_def.add().CopyFrom(new)
            taken.add(new.name)
        if done.transposed_back and len(output_args) == 1:
            renamed[f"{node.name}:{output_args[0]}:0"] = f"{node.name}:y:0"  # the Transpose's
        elif done.transposed_back:
            renamed.update((f"{node.name}:{arg}:0", f"{node.name}:output:{port}")  # the IdentityN's
                           for port, arg in enumerate(output_args))
        laid.append(done)
    if renamed:
        for node in function.node_def:
            for position, text in enumerate(node.input):
                if text in renamed:
                    node.input[position] = renamed[text]
    if not laid:
        return laid, None
    ref = lambda name, arg, _port: f"{name}:{arg}:0"  # noqa: E731  (an output of a one-tensor arg)
    scope = chains.Scope({node.name: node for node in function.node_def}, ref,
                         lambda node: on_cpu(node.device or call_device), taken, _twins(laid, ref),
                         {node.name for done in laid for node in done.added},
                         _forwards(laid, lambda name, port: f"{name}:output:{port}"))
    chains.chain(scope)
    renamed.update(scope.renamed)
    results = {key: renamed[text] for key, text in function.ret.items() if text in renamed}
    for key, text in results.items():  # set after the read: a map must not change while it is iterated
        function.ret[key] = text
    return laid, scope


def _store_body(function: function_pb2.FunctionDef, scope: chains.Scope, laid: list[LaidOut]) -> None:
    """Prune what nothing reads (TensorFlow runs every node of a body) and write the body's nodes back; a
    result that is a laid-out batch norm's statistic is returned where its IdentityN reads it."""
    forwarded = {key: scope.forwards[text] for key, text in function.ret.items() if text in scope.forwards}
    for key, text in forwarded.items():  # set after the read: a map must not change while it is iterated
        function.ret[key] = text
    results = {_producer_name(text) for text in function.ret.values()}
    chains.prune(scope, scope.inserted | set(scope.followed) | {done.replacement.name for done in laid},
                 results | set(function.control_ret.values()))
    stored = [node_def_pb2.NodeDef.FromString(node.SerializeToString()) for node in scope.nodes.values()]
    del function.node_def[:]
    function.node_def.extend(stored)


def _graph_ref(name: str, _arg: str, port: int) -> str:
    return f"{name}:{port}" if port else name


def _output_args(node) -> list[str]:
    return [arg.name for arg in op_def_registry.get(node.op).output_arg]


def _call_devices(view: GraphView, library) -> dict[str, str]:
    """{function: the device its callers run on}, from the graph's call nodes, then from calls in bodies
    (a nested call runs where its own node, or else its caller, runs). A function called from more than
    one kind of device gets none (its nodes are laid out only where they name a CPU themselves)."""
    functions = {function.signature.name: function for function in library}
    kinds: dict[str, set[str]] = {}

    def note(node, where: str) -> list[str]:
        callees = [name for name in called_by(node, functions) if name in functions]
        for callee in callees:
            kinds.setdefault(callee, set()).add(where)
        return callees

    work = []
    for node in view.nodes():
        work.extend(note(node, node.device))
    seen = set()
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        where = _single(kinds.get(name, set()))
        for node in functions[name].node_def:
            work.extend(note(node, node.device or where))
    return {name: _single(found) for name, found in kinds.items()}


def _single(devices: set[str]) -> str:
    """One of `devices` when all of them are of one kind (all CPUs, or all GPUs), else ""."""
    cpu = {device for device in devices if on_cpu(device)}
    if cpu and len(cpu) == len(devices):
        return sorted(cpu)[0]
    gpu = {device for device in devices if on_gpu(device)}
    if gpu and len(gpu) == len(devices):
        return sorted(gpu)[0]
    return ""


def _record_all(report, function: str, laid: list[LaidOut], scope: chains.Scope) -> None:
    """The records of one scope's laid-out ops, of the nodes the two steps added and kept, and of the ops
    that followed into the target layout."""
    for done in laid:
        _record(report, function, done, scope.removed)
    target = {4: "NHWC", 5: "NDHWC"}
    for name, running in scope.followed.items():
        node = scope.nodes[running]
        twin = scope.twins[scope.ref(name, "y", 0)]
        device = node.device or (f"the CPU its function {function} runs on" if function else "the CPU")
        reason = Reason("layout.follows", {"target": target[twin.rank], "device": device})
        decision = report.nodes.get(name)
        if decision is not None:
            decision.add_reason(reason)
        if running not in report.nodes:
            report.nodes.add(running, node.op, reasons=Reason("layout.inserted", {
                "what": f"{target[twin.rank]} form", "source": name, "target": target[twin.rank]}))
    formats = {4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}
    for name in scope.added:  # a caller's Transposes back of a result a body returns in the target layout
        twin = scope.twins.get(name)
        if twin is not None and name not in report.nodes and name not in scope.removed:
            source, target_format = formats[twin.rank]
            const = scope.nodes[name].input[1]
            for added, what in ((const, f"permutation back to {source}"), (name, f"Transpose back to {source}")):
                report.nodes.add(added, scope.nodes[added].op, reasons=Reason("layout.inserted", {
                    "what": what, "source": name.split(f"/{SCOPE}/")[0], "target": target_format}))


def _producer_name(text: str) -> str:
    return text.split(":", 1)[0]


def _record(report, function: str, done: LaidOut, removed: set[str]) -> None:
    """The laid-out op's reason, and a record for each node the rewrite added."""
    name = done.replacement.name
    device = done.replacement.device or (f"the CPU its function {function} runs on" if function else "the CPU")
    decision = report.nodes.get(name)
    code = "layout.cpu" if OPS[done.op].no_kernel else "layout.cpu_sums"
    reason = Reason(code, {"op": done.op, "source": done.source, "target": done.target, "device": device})
    if decision is not None:
        decision.add_reason(reason)
    roles = {"perm_in": f"permutation to {done.target}", "perm_out": f"permutation back to {done.source}",
             "output": f"Transpose back to {done.source}"}
    for node in done.added:
        if node.name in report.nodes or node.name in removed:
            continue
        part = node.name.rpartition("/")[2]  # rewrite.py names them <op>/<SCOPE>/<role>[_<i>]
        what = next((text for role, text in roles.items() if part == role or part.startswith(role + "_")), None)
        what = what or {"Transpose": f"Transpose to {done.target}",
                        "DataFormatVecPermute": f"vector permute to {done.target}"}.get(node.op, f"{done.target} form")
        report.nodes.add(node.name, node.op, reasons=Reason("layout.inserted", {
            "what": what, "source": name, "target": done.target}))
    if done.transposed_back and decision is None:
        report.nodes.add(name, done.replacement.op, reasons=reason)

