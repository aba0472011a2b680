"""Applies the Plans to the graph: type attrs, Cast nodes and float16 round trips.

Where a tensor's dtype changes between producer and consumer, one Cast per producer output and target
dtype is inserted right after the producer (so it stays in the producer's while frame) and shared by
every consumer. Names are deterministic: `<producer>/NpuSimCast_<port>_<dtype>`, and for the second
half of a round trip `<producer>/NpuSimRound_<port>_<dtype>`. With `round_kernel` a float16 round
trip is instead one `NpuSimRoundToFloat16` node of that second name (native/npu_ops.cc: one memory
pass, in place when it may, bit for bit what the two Casts give, overflow to inf included).

Execution of lowered ops (`sim_fp16_execution`):
- native: the op's type attrs become float16 (or bfloat16); Casts sit at the dtype boundaries.
- emulate: the op keeps its float32 kernel and values are rounded where the NPU holds float16: each
  float input not already rounded (nor a constant of float16 values: exact.py) passes through a round
  trip (float32 -> float16 -> float32), and the op's float outputs are rounded once, right after it,
  for all consumers (a cube op so accumulates in float32 and its output is rounded). Ops whose float32
  result is exact on float16 inputs (Relu, MaxPool, Reshape, Concat, ...) and pass-through ops need
  no output round trip. Float16 overflow is real: a value above 65504 becomes inf in the round trip.
cube_fp16in_fp32out rounds the cube op's inputs only, in both execution modes.

Every inserted or retyped node carries `_npu_sim_precision` ("<mode>:<execution>"); inserted Casts
also `_npu_sim_inserted`, retyped nodes `_npu_sim_orig_<attr>` (the original value of each changed
attr). Grappler runs the pass twice, with its own optimizers in between (which may fold, move or fuse
the Casts), so a run that finds these marks does not rewrite again: it only reports the decisions,
reading inserted Casts as transparent and retyped nodes at their original dtype.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import chain

from tensorflow.core.framework import attr_value_pb2, node_def_pb2

from npu_sim_bridge.errors import UnsupportedGraphError
from npu_sim_bridge.graph.names import TensorRef, format_input, parse_input
from npu_sim_bridge.passes.precision import exact, ports
from npu_sim_bridge.passes.precision.plan import FIXED, FP16, FP32, GRAY, PLUMBING, Plan
from npu_sim_bridge.passes.precision.marks import INSERTED_ATTR, PRECISION_ATTR, ORIG_PREFIX, ROUND_OP


# Ops whose float32 result on float16-representable inputs is itself representable in float16: they
# select, move or compare values, never compute new ones. No output round trip is needed after them.
EXACT_OPS = frozenset({
    "Relu", "Relu6", "ReluGrad", "Relu6Grad", "MaxPool", "MaxPoolV2", "MaxPool3D", "Maximum", "Minimum",
    "Max", "Min", "Neg", "Abs", "Sign", "Floor", "Ceil", "Rint", "Round", "ZerosLike", "OnesLike",
    "Reshape", "Transpose", "Squeeze", "ExpandDims", "Identity", "Snapshot", "StopGradient", "Pack",
    "Unpack", "Concat", "ConcatV2", "Split", "SplitV", "Slice", "StridedSlice", "Gather", "GatherV2",
    "GatherNd", "Tile", "Pad", "PadV2", "MirrorPad", "Select", "SelectV2", "ReverseV2", "BroadcastTo",
    "Fill", "DepthToSpace", "SpaceToDepth", "ResizeNearestNeighbor", "EnsureShape", "PreventGradient",
})


class Inserted:
    """The Casts (and rounding kernels) a Rewriter inserted into `view`, in order: (name, source tensor,
    SrcT, DstT, kind) each, the source as its input string ("x" or "x:1"). Only small codes are
    held: the 30k-node synthetic graph gets 20k Casts, and a list of their names or sources was a
    fortieth of its peak memory each (a TensorRef per source a twentieth). The rewrite adds nothing
    but these nodes, so they are the view's places from `first` on, and the view gives their names
    and inputs: the source is the Cast's input, or for the second Cast of a round trip its first
    Cast's. Read them before the view is compacted or given other nodes."""

    _KINDS = ("cast", "round", "round")  # the second: a round trip's second Cast, which reads its first

    def __init__(self, view):
        self._view = view
        self.first = view.place_count()  # the place of the first node the rewrite adds
        self._codes = array("H")  # SrcT, DstT, kind per Cast

    def append(self, name: str, src: int, dst: int, kind: str, reads_cast: bool = False) -> None:
        """Record node `name`, which the rewrite has just added to the view."""
        if self._view.place(name) != self.first + len(self):
            raise RuntimeError(f"internal error of the precision pass: {name} is not the next node added")
        self._codes.extend((src, dst, 2 if reads_cast else self._KINDS.index(kind)))

    def __len__(self) -> int:
        return len(self._codes) // 3

    def names(self) -> Iterator[str]:
        """The inserted nodes' names, in order (the view's strs)."""
        view, first = self._view, self.first
        if view.place_count() != first + len(self):
            raise RuntimeError("internal error of the precision pass: the graph changed after the Casts went in")
        return map(view.name_at, range(first, first + len(self)))

    def __iter__(self) -> Iterator[tuple[str, str, int, int, str]]:
        codes, kinds, inputs = self._codes, self._KINDS, self._view.input_texts
        for index, name in enumerate(self.names()):
            at = 3 * index
            kind = codes[at + 2]
            source = inputs(name)[0]
            if kind == 2:
                source = inputs(source)[0]
            yield name, source, codes[at], codes[at + 1], kinds[kind]


class Rewriter:
    """Rewrites one graph (or function body) as its Plans say."""

    def __init__(self, view, plans: dict[str, Plan], low: int, emulate: bool, mark: str, functions=None,
                 round_kernel: bool = False):
        self.view = view
        self.round_kernel = round_kernel
        self.mark = mark
        self.plans = plans
        self.low = low
        self.emulate = emulate
        self.functions = functions or {}
        # The nodes this rewrite adds (their places start at `inserted.first`): a Cast found by its
        # name (see `_made`) is one of them, or a node the graph had.
        self.inserted = Inserted(view)
        self.casts_inserted = 0
        self.round_trips = 0
        self.exact_left_out = 0  # float16 round trips left out: their tensor holds float16 values (exact.py)
        self._exact: set[tuple[str, int]] = set()
        self.retyped = 0
        self.retyped_names: set[str] = set()
        self.dirty: list[str] = []  # the nodes apply() looked at: check_types checks them and the inserted ones
        self._sigs: dict[str, ports.Signature] = {}

    # ------------------------------------------------------------ dtype rules
    def _npu(self, plan: Plan, port: ports.Port) -> int | None:
        if plan.port_npu is not None and port.list_index is not None:
            return plan.port_npu[port.list_index] if port.list_index < len(plan.port_npu) else None
        return plan.npu

    def _changeable(self, plan: Plan | None, port: ports.Port) -> bool:
        return (plan is not None and plan.role in (FIXED, GRAY, PLUMBING) and port.is_float
                and port.type_attr is not None and port.type_attr in plan.attrs)

    def _lowered(self, plan: Plan, port: ports.Port) -> bool:
        """Emulated: the NPU holds this port in the low dtype but the graph keeps float32."""
        return (self.emulate and self._changeable(plan, port) and port.dtype == FP32
                and self._npu(plan, port) in ports.LOW_TYPES)

    def exec_dtype(self, plan: Plan | None, port: ports.Port) -> int:
        if not self._changeable(plan, port):
            return port.dtype
        npu = self._npu(plan, port)
        if npu is None or plan.cube_split:
            return port.dtype
        if self.emulate and npu in ports.LOW_TYPES and port.dtype == FP32:
            return FP32
        return npu

    def _output_state(self, name: str, plan: Plan | None, port: ports.Port) -> tuple[int, bool, bool]:
        """(graph dtype, physically rounded, rounded for every consumer) of an output of node `name`."""
        dtype = self.exec_dtype(plan, port)
        if plan is None or plan.cube_split or not self._lowered(plan, port):
            return dtype, dtype in ports.LOW_TYPES, False
        exact = plan.role == PLUMBING or plan.op in EXACT_OPS or self._routes_exactly(name, plan)
        return dtype, exact, not exact

    def _routes_exactly(self, name: str, plan: Plan) -> bool:
        """MaxPoolGrad over windows that do not overlap only routes each gradient value, never sums.
        Node `name`'s own windows: nodes alike by their ports may share a plan (plan.Plan)."""
        if plan.op != "MaxPoolGrad":
            return False
        attrs = self.view.node(name).attr
        return "ksize" in attrs and list(attrs["ksize"].list.i) == list(attrs["strides"].list.i)

    def _rounds_inputs(self, plan: Plan | None, port: ports.Port) -> bool:
        if not self._changeable(plan, port):
            return False
        return plan.cube_split or self._lowered(plan, port)

    # -------------------------------------------------------------- rewrite
    def apply(self) -> None:
        self._retype()
        view = self.view
        place = view.place_lookup()  # the index's own lookup: no Python call per node (every name is live)
        marked = bytearray(view.place_count())  # by place, not a set of names: a tenth of the peak
        for name, plan in self.plans.items():
            if plan.role not in (FIXED, GRAY, PLUMBING):
                continue
            if plan.npu == plan.orig and plan.port_npu is None and not plan.cube_split:
                continue  # runs in the dtype it has: no port changes, nothing is rounded
            if any(self.exec_dtype(plan, p) != p.dtype or self._lowered(plan, p) or
                   (plan.cube_split and self._changeable(plan, p)) for p in plan.sig.inputs + plan.sig.outputs):
                marked[place(name)] = 1
                for consumer in view.consumers_of(name):
                    marked[place(consumer)] = 1
        self.dirty = [name for name in view.names() if marked[place(name)]]
        del marked
        for name in self.dirty:
            self._convert_inputs(name)

    def check_types(self) -> None:
        """Every data edge into a changed node or an inserted Cast carries the dtype the consumer expects.

        TensorFlow silently runs the original graph when a rewritten one does not type-check, so a
        mismatch here is raised instead (it would be a bug of this pass).
        """
        # Each once, without a sorted copy (a list of them was a fortieth of the pass's peak): the nodes
        # apply looked at, then the ones it inserted.
        checked, self.dirty = chain(self.dirty, self.inserted.names()), []
        view = self.view
        for name in checked:
            node = view.get(name)
            if node is None:
                continue
            wanted = self._current(node, name).inputs
            for position, text in enumerate(view.input_texts(name)):
                if text.startswith("^") or position >= len(wanted):
                    break
                ref = parse_input(text)
                producer = view.get(ref.node)
                if producer is None:
                    continue
                outputs = self._current(producer, ref.node).outputs
                if ref.port < len(outputs) and outputs[ref.port].dtype != wanted[position].dtype:
                    raise UnsupportedGraphError(
                        f"internal error of the precision pass: input {position} of {name} ({node.op}) would get "
                        f"{ports.dtype_name(outputs[ref.port].dtype)} from {text} but takes "
                        f"{ports.dtype_name(wanted[position].dtype)}; please report this with the graph")

    def finish(self) -> None:
        """Let go of what only the rewrite reads (the plans, the signatures and constants looked up): its
        Casts are in and checked. `inserted` and the counts stay, for the report."""
        self.plans = {}
        self._sigs = {}
        self._exact = set()
        self.retyped_names = set()

    def _current(self, node, name: str) -> ports.Signature:
        """The ports of `node` (named `name`) as the graph now is (retyped and inserted nodes are read again)."""
        plan = self.plans.get(name)
        if plan is not None and name not in self.retyped_names:
            return plan.sig
        return ports.signature(node, self.functions)

    def _retype(self) -> None:
        for name, plan in self.plans.items():
            if plan.role not in (FIXED, GRAY, PLUMBING) or not plan.attrs:
                continue
            node = self.view.node(name)
            changes = {}
            if plan.port_npu is not None:  # IdentityN: one element per port
                types = list(node.attr["T"].list.type)
                new = list(types)
                for port in plan.sig.outputs:
                    if port.list_index is not None and port.list_index < len(new):
                        new[port.list_index] = self.exec_dtype(plan, port)
                if new != types:
                    changes["T"] = attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=new))
            else:
                port = next(p for p in plan.sig.inputs + plan.sig.outputs if self._changeable(plan, p))
                target = self.exec_dtype(plan, port)
                if target != plan.orig:
                    for attr in plan.attrs:
                        changes[attr] = attr_value_pb2.AttrValue(type=target)
                    follow = ports.LIST_FOLLOWS_T.get(node.op)
                    if follow and follow in node.attr:
                        types = [target if t == plan.orig else t for t in node.attr[follow].list.type]
                        changes[follow] = attr_value_pb2.AttrValue(
                            list=attr_value_pb2.AttrValue.ListValue(type=types))
            if not changes:
                continue
            for attr, value in changes.items():
                if attr in node.attr:
                    node.attr[ORIG_PREFIX + attr].CopyFrom(node.attr[attr])
                node.attr[attr].CopyFrom(value)
            node.attr[PRECISION_ATTR].s = self.mark.encode()
            self.retyped += 1
            self.retyped_names.add(name)

    def _signature(self, name: str) -> ports.Signature:
        plan = self.plans.get(name)
        if plan is not None:
            return plan.sig
        sig = self._sigs.get(name)
        if sig is None:
            sig = self._sigs[name] = ports.signature(self.view.node(name), self.functions)
        return sig

    def _convert_inputs(self, name: str) -> None:
        """Point each data input of node `name` at the tensor its port should read (a Cast when needed).
        The input strings come from the view, which shares one str per text (those from the NodeDef are
        new at each read), so the Casts and rewired inputs keep no copies."""
        consumer_plan = self.plans.get(name)
        sig = self._signature(name)
        for position, text in enumerate(self.view.input_texts(name)):
            if text.startswith("^"):
                break
            ref = parse_input(text)
            wanted = sig.inputs[position] if position < len(sig.inputs) else None
            if wanted is not None and wanted.is_ref:
                continue
            new = self.convert(ref, wanted, consumer_plan)
            if new is not None:
                self.view.set_input(name, position, new)

    def convert(self, ref: TensorRef, wanted: ports.Port | None, consumer_plan: Plan | None = None,
                want_dtype: int | None = None) -> TensorRef | None:
        """The tensor a consumer port should read instead of `ref`, or None when `ref` is right."""
        producer_plan = self.plans.get(ref.node)
        have_port = None
        if producer_plan is not None and ref.port < len(producer_plan.sig.outputs):
            have_port = producer_plan.sig.outputs[ref.port]
        elif ref.node in self.view:
            sig = self._signature(ref.node)
            if ref.port < len(sig.outputs):
                have_port = sig.outputs[ref.port]
        original = wanted.dtype if wanted is not None else (have_port.dtype if have_port else None)
        if original not in ports.FLOAT_TYPES:
            return None
        if have_port is not None and have_port.is_float:
            have, rounded, for_all = self._output_state(ref.node, producer_plan, have_port)
        else:
            have, rounded, for_all = original, original in ports.LOW_TYPES, False
        if want_dtype is not None:
            want, round_in = want_dtype, False
        elif wanted is not None:
            want, round_in = self.exec_dtype(consumer_plan, wanted), self._rounds_inputs(consumer_plan, wanted)
        else:
            want, round_in = original, False
        needs_rounding = (round_in or for_all) and not rounded
        if needs_rounding and have == want == FP32 and self.low == FP16 and self._float16_valued(ref):
            needs_rounding = False  # its round trip would give every bit back (exact.py)
        if have == want and not needs_rounding:
            return None
        if have in ports.LOW_TYPES or want in ports.LOW_TYPES or have != want:
            return self._cast(ref, have, want)
        if self.round_kernel and self.low == FP16 and have == FP32:
            return self._cast(ref, FP32, FP32, kind="round", op=ROUND_OP)
        first = self._cast(ref, have, self.low)
        return self._cast(ref, self.low, want, source=first, kind="round")

    def _float16_valued(self, ref: TensorRef) -> bool:
        """Whether `ref` holds float16 values in every step (a constant of them, or a stack's pop of
        values this rewrite rounds: exact.py); each such tensor whose round trip is left out counts
        once in `exact_left_out`."""
        if (ref.node, ref.port) in self._exact:
            return True
        if not (exact.holds_float16_values(self.view, ref.node, ref.port)
                or exact.popped_float16_values(self.view, ref.node, ref.port, self._rounded_here)):
            return False
        self._exact.add((ref.node, ref.port))
        self.exact_left_out += 1
        return True

    def _rounded_here(self, text: str) -> bool:
        """Whether every reader of input text `text` gets float16 values: a constant of them, a round trip
        or Cast from float16 this rewrite inserted, or an output it rounds (or that is exact: plumbing
        and EXACT_OPS on rounded inputs) for all its consumers."""
        ref = parse_input(text)
        node = self.view.get(ref.node)
        if node is None or exact.holds_float16_values(self.view, ref.node, ref.port):
            return node is not None
        if self.view.place(ref.node) >= self.inserted.first:
            return node.op == "Cast" and node.attr["SrcT"].type == FP16
        plan = self.plans.get(ref.node)
        if plan is None or ref.port >= len(plan.sig.outputs) or not plan.sig.outputs[ref.port].is_float:
            return False
        _, rounded, for_all = self._output_state(ref.node, plan, plan.sig.outputs[ref.port])
        return rounded or for_all

    def _cast(self, ref: TensorRef, src: int, dst: int, source: TensorRef | None = None,
              kind: str = "cast", op: str = "Cast") -> TensorRef:
        """A Cast (or, with op=ROUND_OP, a float16 rounding kernel) of `source or ref`, shared per tensor."""
        label = "NpuSimRound" if kind == "round" else "NpuSimCast"
        dtype = ports.dtype_name(FP16 if op == ROUND_OP else src if kind == "round" else dst)
        base = f"{ref.node}/{label}_{ref.port}_{dtype}"
        reads = format_input(source or ref)  # port 0: the producer's name, the str the graph has
        made = self._made(base, op, reads, dst)
        if made is not None:  # its output 0 is the tensor
            return TensorRef(made, 0)
        name = self.view.unique_name(base)
        inputs = [reads]
        node = node_def_pb2.NodeDef(name=name, op=op, input=inputs)
        producer = self.view.get(ref.node)
        if producer is not None and producer.device:
            node.device = producer.device
        if op == "Cast":
            node.attr["SrcT"].type = src
            node.attr["DstT"].type = dst
            node.attr["Truncate"].b = False
        node.attr[PRECISION_ATTR].s = self.mark.encode()
        node.attr[INSERTED_ATTR].b = True
        self.view.add_node(node, name, inputs)
        self.casts_inserted += 1
        self.inserted.append(name, src, dst, kind, reads_cast=source is not None)
        if kind == "round":
            self.round_trips += 1
        return TensorRef(name, 0)

    def _made(self, base: str, op: str, reads: str, dst: int) -> str | None:
        """The node this rewrite inserted as `base` (or `base_1`, ... where the graph had that name) that
        reads `reads` into `dst` with `op`, or None. Casts are shared by their names, not through an
        index of them (an entry per Cast was a thirtieth of the pass's peak on a graph gaining 20k)."""
        view, name, suffix = self.view, base, 0
        while name in view:
            at = view.place(name)
            if (at >= self.inserted.first and view.op(name) == op and view.input_texts(name) == (reads,)
                    and (op != "Cast" or view.node(name).attr["DstT"].type == dst)):
                return view.name_at(at)  # the view's str, not `name`: consumers keep what they read
            suffix += 1
            name = f"{base}_{suffix}"
        return None

