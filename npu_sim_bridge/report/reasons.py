"""Why a node went where it went, as a value: a code plus details, rendered to text only for people.

Passes build `Reason`s and hand them to the report; code that needs to know why (the full-sink
warning, a cond region naming the op that kept it on the host) reads the code and the details,
never the text. `Reason.text()` renders a sentence from the code's template; a reason that wraps
another (`cause`) renders it inline. Codes of placement decisions start with "host."; those of the
CPU layout ("layout.") say which ops run in another layout on the CPU than on the NPU, and why.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

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
}


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


# One Reason per code that has no details: placement gives the same one to every node of a dropped
# segment (an object and a dict per node were a tenth of BERT's peak). Reasons are frozen.
_PLAIN_HOST: dict[str, Reason] = {}


def host(code: str, **details) -> Reason:
    """A placement reason: the node stays on the host (`code` without its "host." prefix). A code with no
    template is refused (ValueError): a reason the report cannot word is a programming error."""
    full = _HOST_CODES.get(code)
    if full is None:
        raise ValueError(f"unknown host reason code {code!r}: add a template for 'host.{code}' to report/reasons.py "
                         f"or use one of {', '.join(sorted(_HOST_CODES))}")
    if details:
        return Reason(full, details)
    plain = _PLAIN_HOST.get(code)
    if plain is None:
        plain = _PLAIN_HOST[code] = Reason(full, {})
    return plain


class NodeText:
    """A reason rendered when read, whose sentence depends on the node it is given to: one object can
    stand on several nodes (a fusion's, on the fused node and on each node fused away)."""

    __slots__ = ()

    def text_for(self, name: str) -> str:
        raise NotImplementedError


def as_reason(value: "Reason | str | object", name: str = "") -> Reason:
    """A Reason for a value that passes still give as text (or as an object that formats its text
    when read, for reasons that name a node; a NodeText for node `name`)."""
    if isinstance(value, Reason):
        return value
    if isinstance(value, NodeText):
        return Reason("text", {"text": value.text_for(name)})
    return Reason("text", {"text": value if isinstance(value, str) else str(value)})
