"""The decision a precision rewrite makes for one node (a Plan), the roles and votes it is made of, and
the effective precision mode (ModeInfo).

Roles (decide.py says which node gets which): source, pinned, plumbing, cast, inserted, opaque, fixed
and gray. Votes are ordered NONE < LOW < HIGH: the gray rule (gray.py) takes the largest vote among a
node's deciding inputs.
"""

from __future__ import annotations

import dataclasses

from tensorflow.core.framework import types_pb2

from npu_sim_bridge.config.registry import effective_precision_mode
from npu_sim_bridge.passes.precision import ports
from npu_sim_bridge.report.reasons import LazyReason, Reason

FP32, FP16, BF16 = types_pb2.DT_FLOAT, types_pb2.DT_HALF, types_pb2.DT_BFLOAT16

# Votes, ordered: the gray rule takes the largest vote among the deciding inputs.
NONE, LOW, HIGH = 0, 1, 2

SOURCE, PINNED, PLUMBING, CAST, OPAQUE, FIXED, GRAY, INSERTED = (
    "source", "pinned", "plumbing", "cast", "opaque", "fixed", "gray", "inserted")
FOLLOWERS = frozenset({GRAY, PLUMBING, INSERTED})  # roles whose plans the gray rule changes per node

MIX_MODES = ("allow_mix_precision", "allow_mix_precision_bf16")

# Type attrs that stay as they are when the op's dtype changes (batch norm statistics stay float32).
FIXED_ATTRS = {"FusedBatchNorm": ("U",), "FusedBatchNormV2": ("U",), "FusedBatchNormV3": ("U",),
               "FusedBatchNormGradV2": ("U",), "FusedBatchNormGradV3": ("U",), "_FusedBatchNormEx": ("U",)}

_LOW_OF_MODE = {"allow_mix_precision_bf16": BF16, "allow_fp32_to_bf16": BF16}


class Follows(LazyReason):
    """The reason of a node that follows another's dtype, made when the report is read: a gray op's
    ("precision.gray_follows", its list `rule`, the node and, when it stays high, the dtype) or a
    pass-through op's ("precision.pass_through_follows", `rule` None). A Reason and its dict per gray
    and pass-through node were a tenth of BERT's peak."""

    __slots__ = ("rule", "node", "dtype")

    def __init__(self, rule: str | None, node: str, dtype: str | None = None):
        self.rule, self.node, self.dtype = rule, node, dtype

    @property
    def code(self) -> str:
        return "precision.pass_through_follows" if self.rule is None else "precision.gray_follows"

    def reason_for(self, name: str) -> Reason:
        if self.rule is None:
            return Reason("precision.pass_through_follows", {"node": self.node})
        details = {"rule": self.rule, "node": self.node}
        if self.dtype:
            details["dtype"] = self.dtype
        return Reason("precision.gray_follows", details)


@dataclasses.dataclass(slots=True)
class Plan:
    """What the precision pass does with one node.

    Nodes alike by their ports whose plan nothing changes once made (not gray, pass-through or
    inserted: those follow their inputs) share one Plan: `name` is then the node it was worked out
    for, and a node's own name is its key in the plans."""

    name: str
    op: str
    role: str
    sig: ports.Signature
    attrs: tuple = ()                 # changeable type attrs
    orig: int | None = None           # their current dtype
    colour: str | None = None
    rule: str = ""
    npu: int | None = None            # dtype on the NPU (the report's dtype_after)
    reason: "Reason | Follows | None" = None
    vote: int = NONE
    follows: str | None = None
    cube_split: bool = False          # cube_fp16in_fp32out: float16 inputs, float32 output
    port_votes: list | None = None    # IdentityN: per element
    port_npu: list | None = None

    def copy_as(self, name: str) -> "Plan":
        """A fresh plan for node `name` with this plan's decision (nothing mutable shared)."""
        return Plan(name, self.op, self.role, self.sig, self.attrs, self.orig, self.colour, self.rule, self.npu,
                    self.reason, self.vote, self.follows, self.cube_split,
                    None if self.port_votes is None else list(self.port_votes),
                    None if self.port_npu is None else list(self.port_npu))

    def npu_of_port(self, port: int) -> int | None:
        if self.port_npu is not None:
            return self.port_npu[port] if port < len(self.port_npu) else None
        if self._fixed_port(port):
            return self.sig.outputs[port].dtype
        return self.npu

    def vote_of_port(self, port: int) -> int:
        if self.port_votes is not None:
            return self.port_votes[port] if port < len(self.port_votes) else NONE
        if self.vote != NONE and self._fixed_port(port):
            return HIGH if self.sig.outputs[port].dtype not in ports.LOW_TYPES else LOW
        return self.vote

    def _fixed_port(self, port: int) -> bool:
        """An output whose type attr never changes with the op (the batch statistics, reserve spaces and
        scale/offset gradients of a batch norm): it keeps its dtype, and its consumers follow that dtype,
        not the op's."""
        fixed = FIXED_ATTRS.get(self.op)
        if not fixed or port >= len(self.sig.outputs):
            return False
        out = self.sig.outputs[port]
        return out.is_float and out.type_attr in fixed


@dataclasses.dataclass(frozen=True)
class ModeInfo:
    """The effective mode, its low dtype and how float16 is executed."""

    mode: str
    low: int
    emulate: bool
    mode_key: str   # 'precision_mode' or 'precision_mode_v2', for messages
    mode_text: str  # the value as the user wrote it

    @property
    def is_mix(self) -> bool:
        return self.mode in MIX_MODES


def mode_info(options) -> ModeInfo:
    mode = effective_precision_mode(options)
    v2 = options.get("precision_mode_v2")
    key, text = ("precision_mode_v2", v2) if v2 else ("precision_mode", options.get("precision_mode") or mode)
    return ModeInfo(mode=mode, low=_LOW_OF_MODE.get(mode, FP16),
                    emulate=(options.get("sim_fp16_execution") or "emulate") == "emulate",
                    mode_key=key, mode_text=text)


def name_of(dtype: int | None) -> str | None:
    return ports.dtype_name(dtype) if dtype is not None else None


def share_alike(plans: dict[str, Plan]) -> None:
    """Let the plans of the nodes that followed their inputs (gray, pass-through, inserted) share one
    Plan where they rewrite alike: the same op, role, ports, type attrs and dtypes. Only for a rewrite
    whose report rows are made already (their reasons, votes and the nodes they follow differ, and
    the shared plan keeps one's). A Plan each was a twentieth of the precision pass's peak memory on a
    graph of dense blocks."""
    shared: dict[tuple, Plan] = {}
    for name, plan in plans.items():
        if plan.role in FOLLOWERS:
            key = (plan.op, plan.role, plan.sig, plan.attrs, plan.orig, plan.npu, plan.cube_split,
                   None if plan.port_npu is None else tuple(plan.port_npu))
            plans[name] = shared.setdefault(key, plan)
