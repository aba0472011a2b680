"""Why a node went where it went, as a value: a code plus details, rendered to text only for people.

Passes build `Reason`s and hand them to the report; code that needs to know why (the full-sink
warning, a cond region naming the op that kept it on the host) reads the code and the details,
never the text. `Reason.text()` renders a sentence from the code's template; a reason that wraps
another (`cause`) renders it inline. A code names its decision family by its prefix:

    host.       placement: why a node stays on the host (rendered with a "host: " prefix)
    layout.     the CPU layout: ops that run in another layout on the CPU than on the NPU, and why
    precision.  the dtype a node runs in (white/black list, gray follows, keeps, forced, inserted Casts)
    fusion.     fused by a rule, fused into another node, switched off, not fired, Grappler's remapper
    dtypes.     kept in float32 by the customize_dtypes file
    hub.        a control hub the pipeline inserted

`reason(code, **details)` (and `host(code, ...)`) refuse a code with no template. A pass that records
a reason per node keeps a `LazyReason` (a few slots) that becomes its Reason when the report is read.
The "text" code is left only for free text set on a record by hand.
"""

from __future__ import annotations

import dataclasses
import string
from typing import Any, Callable, Mapping

_TEMPLATES: dict[str, str] = {
    "text": "{text}",
    "host.graph_input": "graph input ({op}) stays outside the GeOps, which take its value",
    "host.runtime_op": "runtime op {op} stays outside the GeOps",
    "host.fed": "fed by the session, so it keeps its name outside the GeOps",
    "host.scoped": "in without_npu_compile_scope",
    "host.py_func": "{op} runs on the host",
    "host.checkpoint": "checkpoint op {op} runs on the host",
    "host.summary": "summary op {op} runs on the host",
    "host.data_input": "dataset/iterator op {op} runs on the host",
    "host.queue": "queue op {op} runs on the host",
    "host.variable": "variable op {op} stays on the host; its reads and updates take the handle as a GeOp input",
    "host.string_op": "string op {op} (string tensors stay on the host)",
    "host.unsupported_graph": "{error}",
    "host.undefined_function": "calls function {function}, which the graph library does not define",
    "host.function_body": "function {function} holds host op {node} ({cause})",
    "host.not_device_op": "op type {op} is not in the device op list{note}",
    "host.gray_in_mix": "op type {op} is marked isGray in the device op list (host in mixed compute)",
    "host.protected_tensor": "fetched or preserved, and its {kind} tensor cannot leave a GeOp",
    "host.frame_tangled": "v1 while frame {frame} is tangled in a cycle with nodes outside it",
    "host.while_frame": "v1 while frame {frame} holds host op {node} ({cause})",
    "host.cond_region": "v1 cond region of predicate {predicate} holds host op {node} ({cause})",
    "host.boundary_tensor": "{kind} tensor at the segment boundary ({producer} -> {consumer})",
    "host.trivial_segment": "its segment holds only constants, variable reads or pass-through ops, not worth a GeOp",
    "host.full_sink": "mix_compile_mode is off, so only the largest segment sinks; enable mix_compile_mode "
                      "to sink this one too",
    "host.cond_bridge": "carries a v1 cond branch tensor live across a GeOp boundary",
    "host.geop_stub": "keeps the name of a fetched or preserved node that runs in {geop}",
    "host.outside_geops": "outside the GeOps made by an earlier NpuOptimizer run",
    "host.by_placement": "decided by the placement pass",
    "layout.cpu": "laid out for the CPU: TensorFlow's CPU kernel of {op} takes {target} only, so on {device} it runs "
                  "in {target} between Transposes (on the NPU it stays {source})",
    "layout.cpu_sums": "laid out for the CPU: TensorFlow's CPU kernel of {op} takes {source} too, but oneDNN's sums in "
                       "another order there than in {target}, so on {device} it runs in {target} between Transposes, "
                       "as a {target} model's does (on the NPU it stays {source})",
    "layout.inserted": "inserted by layout: {what} of {source}, for its {target} kernel on the CPU",
    "layout.follows": "runs in {target} on {device} between ops laid out for the CPU, which gives the same values "
                      "(element by element) and lets the Transposes around it cancel",
    # The precision pass: why a node runs in the dtype it runs in ({keeps}: "keeps <dtype>", or
    # "keeps its dtype" for a dtype the pass does not lower; {head}: "gray", or "gray (<rule>)").
    "precision.earlier_cast": "inserted by the precision pass",
    "precision.existing_cast": "existing Cast: keeps SrcT and DstT",
    "precision.source": "source: {keeps}",
    "precision.variable": "{kind}: {keeps}",
    "precision.function_result": "function result: {keeps}",
    "precision.fed": "fed: {keeps}",
    "precision.preserved": "preserved: {keeps}",
    "precision.host": "host: {keeps}",
    "precision.keep_dtype": "keep_dtype_scope",
    "precision.function_call": "function call: keeps its signature dtypes (its body is rewritten)",
    "precision.reads_variable": "reads or updates a variable: {keeps}",
    "precision.no_type_attr": "no type attr to change: {keeps}",
    "precision.mixed_attrs": "type attrs of different float dtypes: keeps them",
    "precision.no_op_info": "no op info in the operator library{note_text}: {keeps}",
    "precision.forced": "{mode}",
    "precision.forced_up": "{mode}: {dtype} op runs float32",
    "precision.ai_cpu": "AI CPU fallback: no float32 kernel on the device and {rule}",
    "precision.no_kernel": "no {dtype} kernel on the device",
    "precision.cube_split": "cube_fp16in_fp32out: float16 inputs, float32 output",
    "precision.mode_keeps": "{mode}: keeps {dtype}",
    "precision.mix_keeps": "keeps {dtype}: mix precision lowers float32 ops only",
    "precision.list_no_kernel": "{rule}: no {dtype} kernel on the device",
    "precision.white_list": "white list",
    "precision.black_list": "black list",
    "precision.modify_mixlist": "{rule}",
    "precision.gray_follows": "{head}: follows {node}{dtype_text}",
    "precision.gray_undecided": "{head}: no decided float input, keeps {dtype}",
    "precision.pass_through_ports": "pass-through: each output follows its input",
    "precision.pass_through_follows": "pass-through: follows {node}",
    "precision.pass_through_undecided": "pass-through: no decided input",
    "precision.loop_merge": "pass-through: carries the dtype of its loop Merge {merge}",
    "precision.fetch_exit": "{decision}; fetched as {fetched}, which leaves the device in {dtype}",
    "precision.inserted": "inserted by precision: {what} of {source}",
    # Fusion: the fused node, a node fused away, and one whose fused node was fused again.
    "fusion.fused_by": "fused by {rule}: {parts} -> {op}",
    "fusion.fused_into": "fused into {root} ({op}) by {rule}",
    "fusion.runs_inside": "runs inside {target}, as {via} does",
    "fusion.switched_off": "{rule} switched off ({why})",
    "fusion.not_fired": "{rule} did not fire: {why}",
    "fusion.remapper_kept": "Grappler's remapper fused it and it stays fused: {why}",
    "fusion.remapper_unfused": "Grappler's remapper had fused {op_chain} into {fused}; taken apart so that the NPU's "
                               "fusion rules (fusion_switch_file) decide",
    "fusion.remapper_rebuilt": "rebuilt from {node} ({fused}), which Grappler's remapper made",
    # customize_dtypes: a node the file keeps in float32 ({matched}: "op type <type>" or "its name").
    "dtypes.customize": "customize_dtypes {path!r} line {line} ({matched}): keeps float32",
    # A control hub the pipeline inserted in place of a run of shared control inputs.
    "hub.control": "inserted: waits on the {inputs} control inputs {readers} nodes shared, and they wait on it "
                   "instead ({saved} edges fewer)",
}

_KEPT = ("float32", "float16", "bfloat16")

# Words a template uses that are made from a reason's details when it is rendered (the details keep the
# facts: a dtype, a list rule, the fused nodes and their ops).
_DERIVED: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "keeps": lambda d: f"keeps {d['dtype']}" if d.get("dtype") in _KEPT else "keeps its dtype",
    "note_text": lambda d: f" ({d['note']})" if d.get("note") else "",
    "head": lambda d: "gray" if d["rule"] == "gray list" else f"gray ({d['rule']})",
    "dtype_text": lambda d: f" ({d['dtype']})" if d.get("dtype") else "",
    "parts": lambda d: " + ".join(f"{node} ({op})" for node, op in zip(d["nodes"], d["ops"])),
    "op_chain": lambda d: " + ".join(d["ops"]),
    "matched": lambda d: f"op type {d['op_type']}" if d.get("op_type") else "its name",
}
# Per code, the derived words its template uses.
_USES: dict[str, tuple[str, ...]] = {
    code: tuple(field for _, field, _, _ in string.Formatter().parse(template) if field in _DERIVED)
    for code, template in _TEMPLATES.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """A decision's why: `code` names the rule, `details` its facts (op, node, frame, cause, ...)."""

    code: str
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def is_host(self) -> bool:
        return self.code.startswith("host.")

    def get(self, key: str, default=None):
        return self.details.get(key, default)

    def body(self) -> str:
        """The sentence without its "host: " prefix (how a wrapping reason quotes it)."""
        template = _TEMPLATES.get(self.code)
        values = {key: (value.body() if isinstance(value, Reason) else value) for key, value in self.details.items()}
        if template is None:
            return f"{self.code} {values}" if values else self.code
        for word in _USES[self.code]:
            values[word] = _DERIVED[word](self.details)
        return template.format(**values)

    def text(self) -> str:
        return f"host: {self.body()}" if self.is_host else self.body()

    __str__ = text

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the code and the details (a wrapped reason as its own dict)."""
        return {"code": self.code, **{key: (value.to_dict() if isinstance(value, Reason) else value)
                                      for key, value in self.details.items()}}


# "host." + code, made once per code: a graph's host nodes share a handful of codes.
_HOST_CODES: dict[str, str] = {code[len("host."):]: code for code in _TEMPLATES if code.startswith("host.")}


def host(code: str, **details) -> Reason:
    """A placement reason: the node stays on the host (`code` without its "host." prefix). A code with no
    template is refused (ValueError): a reason the report cannot word is a programming error."""
    full = _HOST_CODES.get(code)
    if full is None:
        raise ValueError(f"unknown host reason code {code!r}: add a template for 'host.{code}' to report/reasons.py "
                         f"or use one of {', '.join(sorted(_HOST_CODES))}")
    return reason(full, **details)


def reason(code: str, **details) -> Reason:
    """A reason of any family ("precision.white_list", "fusion.fused_into", ...). A code with no template
    is refused (ValueError): a reason the report cannot word is a programming error. A code without
    details gives one shared Reason (reasons are frozen)."""
    if code not in _TEMPLATES or code == "text":
        raise ValueError(f"unknown reason code {code!r}: add a template for it to report/reasons.py or use one of "
                         f"{', '.join(sorted(c for c in _TEMPLATES if c != 'text'))}")
    if details:
        return Reason(code, details)
    plain = _PLAIN.get(code)
    if plain is None:
        plain = _PLAIN[code] = Reason(code, {})
    return plain


# One Reason per code that has no details: placement gives the same one to every node of a dropped
# segment (an object and a dict per node were a tenth of BERT's peak). Reasons are frozen.
_PLAIN: dict[str, Reason] = {}


def codes(family: str = "") -> list[str]:
    """The known reason codes (those of one family, e.g. "precision", when given), sorted."""
    prefix = family + "." if family else ""
    return sorted(code for code in _TEMPLATES if code != "text" and code.startswith(prefix))


class LazyReason:
    """A reason made into a `Reason` only when the report is read, by a pass that records one per node
    (a Reason and its dict per node were a tenth of BERT's peak): a few slots now, the code and its
    details at the read. One object can stand on several nodes (a fusion's, on the fused node and on
    each node fused away), so it is given the node it is read for."""

    __slots__ = ()

    def reason_for(self, name: str) -> Reason:
        raise NotImplementedError


def as_reason(value: "Reason | str | LazyReason", name: str = "") -> Reason:
    """A Reason for a value a pass recorded: a Reason, a LazyReason (read for node `name`), or free text
    set on a record by hand (a "text" Reason)."""
    if isinstance(value, Reason):
        return value
    if isinstance(value, LazyReason):
        return value.reason_for(name)
    return Reason("text", {"text": value if isinstance(value, str) else str(value)})
