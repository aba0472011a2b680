"""Per-node dtype decisions of a precision rewrite: which role each node with a float port has, and
the Plan it gets (plan.py holds the Plan, mode_table.py what each mode makes of a library op, gray.py
the gray rule that settles the nodes following their inputs).

Roles:
- source: placeholders, constants, variables and their reads, containers, function arguments. Never
  changed; they do not decide for the ops after them.
- pinned: fed or preserved nodes (keep dtype and name), `_keep_dtype` nodes (keep_dtype_scope),
  nodes the placement pass keeps on the host, ops that read or update a variable (ref or resource
  input). Never changed. Preserved and keep_dtype nodes decide (they run float32); fed, host and
  variable nodes do not. A fetched node is decided as if nothing fetched it (a fetch reads an op's
  output, it does not change how the op runs): boundary.py converts what leaves the device.
- plumbing: Identity-like and v1 control-flow ops (Enter/Exit/Merge/Switch/NextIteration, IdentityN,
  Squeeze, ExpandDims, ...). They carry the dtype of what flows in: each output follows its inputs.
- cast: existing Cast nodes keep SrcT/DstT.
- inserted: Casts an earlier run of the pass inserted; transparent (they carry their input's vote).
- opaque: functional While/If and function calls (their bodies are rewritten separately), ops the
  operator library has no op info for, unknown ops. They keep their dtype and do not decide.
- fixed / gray: ops of the operator library, decided by the mode (mode_table.fixed_decision), or by
  the gray rule where the mode leaves them to it.
"""

from __future__ import annotations

import functools

from npu_sim_bridge.graph.attr_names import KEEP_DTYPE_ATTR
from npu_sim_bridge.graph.op_categories import (FUNCTION_RUNNING_OPS, FUSED_BASE_OPS, PASS_THROUGH_OPS,
                                                 VALUE_SINK_OPS, VALUE_SOURCE_OPS)
from npu_sim_bridge.graph.ports import port_attrs, port_key_of, registered_spec
from npu_sim_bridge.passes.precision import ports
from npu_sim_bridge.passes.precision.gray import GrayRule
from npu_sim_bridge.passes.precision.marks import CONVERSION_OPS, ORIG_PREFIX, is_inserted_conversion
from npu_sim_bridge.passes.precision.mode_table import fixed_decision, must_keep_error
from npu_sim_bridge.passes.precision.plan import (CAST, FIXED, FIXED_ATTRS, FOLLOWERS, FP32, GRAY, HIGH,
                                                  INSERTED, LOW, NONE, OPAQUE, PINNED, PLUMBING, SOURCE,
                                                  ModeInfo, Plan, name_of)
from npu_sim_bridge.report.reasons import Reason
from npu_sim_bridge.report.reasons import reason as coded

_NEVER_RETYPED = frozenset({"Cast", "Bitcast"})
_UNSEEN = object()  # a port key no node had yet
_VARIABLE_KINDS = ("variable", "container")


@functools.lru_cache(maxsize=4096)
def _marks_that_decide(op: str) -> tuple[str, ...] | None:
    """The attrs whose presence makes a node of `op` decide on its own (keep_dtype, the original dtypes an
    earlier run recorded); None for ops whose nodes always do (conversions, unregistered ops)."""
    if op in CONVERSION_OPS or registered_spec(op) is None:
        return None
    return (KEEP_DTYPE_ATTR, *(ORIG_PREFIX + name for name, _ in port_attrs(op)))


class Decider:
    """Builds the Plans of one graph (or function body)."""

    def __init__(self, view, library, lists, mode: ModeInfo, fed=(), preserved=(), functions=None, host=()):
        self.view = view
        self.host = host  # placement's set (not copied: a large part of the graph on BERT)
        self.library = library
        self.lists = lists
        self.mode = mode
        self.fed = frozenset(fed)
        self.preserved = frozenset(preserved)
        self.functions = functions or {}
        self.plans: dict[str, Plan] = {}
        self.must_keep_failures: list[tuple[str, str, int]] = []
        # The sets a node's name may be in, in the order _classify_node asks: alike nodes share a
        # template only within the same first set (see _template_key).
        self._named_sets = (self.fed, self.preserved, self.host)
        # port key -> (the plan of the first node with that key, whether it failed must_keep_origin_dtype)
        self._templates: dict[tuple, tuple[Plan, bool]] = {}
        # One Reason per code and details: the plans (and the report rows made from them) of a graph's
        # hundreds of variables, sources and host nodes share a handful of reasons.
        self._shared: dict[tuple, Reason] = {}

    # ----------------------------------------------------------------- driver
    def run(self) -> dict[str, Plan]:
        plans = self.plans
        for name, node in self.view.named_nodes():
            plan = self._classify(name, node)
            if plan is not None:
                plans[name] = plan
        if self.must_keep_failures:
            raise must_keep_error(self.mode, self.must_keep_failures)
        rule = GrayRule(self.view, plans, self.mode.low, self._why)
        rule.settle()
        rule.match_loop_merges()
        return plans

    # --------------------------------------------------------- classification
    def _classify(self, name: str, node) -> Plan | None:
        """The node's plan, or None for a node without float ports.

        Nodes of a registered op with equal port keys (op type and the attrs its ports depend on: its
        dtypes) get the same decision unless their name (fed, preserved, host) or their own
        marks (keep_dtype, an earlier run's) say otherwise: the first is worked out, the others copy it.
        """
        key = self._template_key(name, node)
        if key is None:
            sig = ports.signature(node, self.functions)
            return self._classify_node(name, node, sig) if sig.has_float else None
        found = self._templates.get(key, _UNSEEN)
        if found is _UNSEEN:
            sig = ports.signature(node, self.functions)
            if not sig.has_float:
                self._templates[key] = None
                return None
            failures = len(self.must_keep_failures)
            plan = self._classify_node(name, node, sig)
            self._templates[key] = plan, len(self.must_keep_failures) > failures
            return plan
        if found is None:
            return None
        template, failed = found
        if failed:
            self.must_keep_failures.append((template.op, name, template.orig))
        if template.role in FOLLOWERS:  # decided again from its own inputs: a plan of its own
            return template.copy_as(name)
        return template  # decided once for all alike (a plan per node was a tenth of the peak)

    def _template_key(self, name: str, node) -> tuple | None:
        """The node's port key when its plan may be copied from another node's, else None. A node that is
        fed, preserved or on the host is alike only to nodes in the same first of those sets
        (the key says which): on BERT the host nodes alone had a plan each, a twentieth of the peak."""
        op = node.op
        marks = _marks_that_decide(op)
        if marks is None or op in self.functions:
            return None
        attrs = node.attr
        for mark in marks:
            if mark in attrs:
                return None
        key = port_key_of(op, attrs)
        fed, preserved, host = self._named_sets
        if name in host or name in fed or name in preserved:
            return (0 if name in fed else 1 if name in preserved else 2), key
        return key

    def _classify_node(self, name: str, node, sig) -> Plan:
        op = self.view.op(name)  # the view's str: protobuf makes one at each read, and the plan keeps it
        plan = Plan(name, op, SOURCE, sig)
        self._set_attrs(node, plan)
        dtype = name_of(plan.orig)  # what a kept node's reason says it keeps
        why = self._why
        kind = self.library.not_compute_kind(op)
        has_ref = sig.reads_variable

        if is_inserted_conversion(node):
            plan.role, plan.reason = INSERTED, why("precision.earlier_cast")
            return plan
        if op == "Cast":
            return self._classify_cast(node, plan)
        if op in VALUE_SOURCE_OPS or kind == "source":
            return self._keep(plan, SOURCE, NONE, why("precision.source", dtype=dtype))
        if op in ("VariableV2", "Variable", "VarHandleOp") or kind in _VARIABLE_KINDS:
            return self._keep(plan, SOURCE, NONE, why("precision.variable", kind=kind or "variable", dtype=dtype))
        if op in VALUE_SINK_OPS:
            return self._keep(plan, PINNED, HIGH, why("precision.function_result", dtype=dtype))
        if node.name in self.fed:
            return self._keep(plan, PINNED, NONE, why("precision.fed", dtype=dtype))
        if node.name in self.preserved:
            return self._keep(plan, PINNED, HIGH, why("precision.preserved", dtype=dtype))
        if node.name in self.host:
            return self._keep(plan, PINNED, NONE, why("precision.host", dtype=dtype))
        if KEEP_DTYPE_ATTR in node.attr and node.attr[KEEP_DTYPE_ATTR].b:
            return self._keep(plan, PINNED, HIGH, why("precision.keep_dtype"))
        if op in FUNCTION_RUNNING_OPS or op in self.functions:
            return self._keep(plan, OPAQUE, NONE, why("precision.function_call"))
        if has_ref:
            return self._keep(plan, PINNED, NONE, why("precision.reads_variable", dtype=dtype))
        if not plan.attrs:
            return self._keep(plan, OPAQUE, NONE, why("precision.no_type_attr", dtype=dtype))
        if plan.orig is None:
            return self._keep(plan, OPAQUE, NONE, why("precision.mixed_attrs"))
        if op in PASS_THROUGH_OPS or kind == "pass_through":
            plan.role = PLUMBING
            if op == "IdentityN":
                plan.port_votes = [NONE] * len(sig.outputs)
                plan.port_npu = [p.dtype if p.is_float else None for p in sig.outputs]
            plan.npu = plan.orig
            return plan

        base = FUSED_BASE_OPS.get(op, op)  # Grappler's remapper fused it: the base op's list
        info = self.library.info(base)
        if info is None:
            note = self.library.no_op_info_note(base) or None
            return self._keep(plan, OPAQUE, NONE, why("precision.no_op_info", note=note, dtype=dtype))
        entry = self.lists.classify(base)
        plan.colour, plan.rule = entry.colour, entry.rule
        decided = fixed_decision(plan, info, self.mode, self._why, self.must_keep_failures)
        if decided is None:
            plan.role = GRAY
            plan.npu = plan.orig
            return plan
        plan.role = FIXED
        plan.npu, plan.reason = decided
        plan.vote = LOW if plan.npu in ports.LOW_TYPES else HIGH
        return plan

    def _set_attrs(self, node, plan: Plan) -> None:
        if node.op in _NEVER_RETYPED:
            return
        fixed = FIXED_ATTRS.get(node.op, ())
        names = tuple(a for a in plan.sig.float_attrs if a not in fixed) if fixed else plan.sig.float_attrs
        plan.attrs = names
        if node.op == "IdentityN":
            plan.orig = FP32 if names else None
            return
        dtypes = set()
        for attr in names:
            original = ORIG_PREFIX + attr  # retyped by an earlier run: decide from the original dtype
            dtypes.add(ports.type_attr_dtype(node, original if original in node.attr else attr, None))
        if len(dtypes) == 1:
            dtype = dtypes.pop()
            if dtype in ports.FLOAT_TYPES:
                plan.orig = dtype

    def _why(self, code: str, **details) -> Reason:
        """The shared Reason of a code and its details (see `_shared`)."""
        key = (code, *details.values())
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = coded(code, **details)
        return found

    def _keep(self, plan: Plan, role: str, vote: int, reason: Reason) -> Plan:
        plan.role, plan.vote, plan.reason, plan.npu = role, vote, reason, plan.orig
        if plan.port_npu is None and plan.orig is None:
            plan.npu = None
        return plan

    def _classify_cast(self, node, plan: Plan) -> Plan:
        src, dst = node.attr["SrcT"].type, node.attr["DstT"].type
        plan.role, plan.reason = CAST, self._why("precision.existing_cast")
        plan.orig = plan.npu = dst if dst in ports.FLOAT_TYPES else None
        if dst in ports.LOW_TYPES:
            plan.vote = LOW
        elif dst in ports.FLOAT_TYPES and src in ports.FLOAT_TYPES:
            plan.vote = HIGH
        else:
            plan.vote = NONE
        return plan
