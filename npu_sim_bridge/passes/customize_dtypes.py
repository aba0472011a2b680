"""The "customize_dtypes" pass: the option's file pins single ops (by name) or op types to float32.

The file has CANN's customize_dtypes format, one op per line:
    Opname::InputDtype:float32,float32,OutputDtype:float32
    OpType::MatMulV2:InputDtype:float32,float32,OutputDtype:float32
Blank lines and lines starting with # or // are comments (`npu-sim bisect` writes what each entry
fixed there). An op type may be a TensorFlow or an Ascend IR name. The simulation keeps a listed op
in its original dtype under every precision mode (the `_keep_dtype` mark keep_dtype_scope sets), so
every dtype a line names must be float32 (or the op's own dtype); another dtype is an error naming
the line, because the simulator cannot force an op to float16 by name. A name no node has is a
warning. The pass runs before fusion: a marked op is not fused with unmarked neighbours (CANN
ignores customize_dtypes on fused ops; here the setting wins, so that what the file asks is done).
"""

from __future__ import annotations

import dataclasses
import difflib
import re

from npu_sim_bridge.config import jsonfile
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.graph.attr_names import KEEP_DTYPE_ATTR
from npu_sim_bridge.passes.base import GraphPass, PassContext, PassResult
from npu_sim_bridge.report.model import NodeDecision, node_dtype
from npu_sim_bridge.report.reasons import reason

EXAMPLE = "dense/MatMul::InputDtype:float32,float32,OutputDtype:float32"
_LINE = re.compile(r"^(?P<name>[^:\s][^\s]*?)::(?:(?P<type>[A-Za-z0-9_]+):)?(?P<rest>InputDtype:.*|OutputDtype:.*)$")
_KEPT = ("float32", "float", "fp32", "dt_float")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One line: a node name, or (by_type) an op type, pinned to its original dtype."""

    name: str
    by_type: bool
    line: int


def parse_customize_dtypes(text: str, path: str = "<string>") -> list[Entry]:
    """The entries of a customize_dtypes file (see the module docstring)."""
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "//")):
            continue
        match = _LINE.match(line.replace(" ", ""))
        if match is None:
            raise ConfigError(f"customize_dtypes file {path!r} line {number}: {raw.strip()!r} is not "
                              f"'Opname::InputDtype:...,OutputDtype:...' nor 'OpType::TypeName:InputDtype:...'; "
                              f"for example {EXAMPLE}")
        dtypes = [item for item in re.split(r"[,:;]", match.group("rest"))
                  if item and item not in ("InputDtype", "OutputDtype")]
        wrong = [item for item in dtypes if item.lower() not in _KEPT]
        if wrong:
            raise ConfigError(f"customize_dtypes file {path!r} line {number}: dtype {wrong[0]!r}; the simulator "
                              "keeps a listed op in float32 (its original dtype) only, so list float32, or leave "
                              "the op out and let precision_mode decide it")
        if match.group("name") == "OpType":
            if not match.group("type"):
                raise ConfigError(f"customize_dtypes file {path!r} line {number}: OpType:: needs a type name, "
                                  "e.g. OpType::MatMulV2:InputDtype:float32,float32,OutputDtype:float32")
            entries.append(Entry(match.group("type"), True, number))
        else:
            entries.append(Entry(match.group("name"), False, number))
    return entries


def load_customize_dtypes(path: str) -> list[Entry]:
    return parse_customize_dtypes(jsonfile.read_option_file(path, "customize_dtypes file", EXAMPLE), path)


class CustomizeDtypesPass(GraphPass):
    """Mark the ops the customize_dtypes file lists so that they keep float32."""

    name = "customize_dtypes"
    description = "customize_dtypes: the ops a file names by name or type keep float32"
    edits_library = False

    def wanted(self, options) -> bool:
        return bool(options.get("customize_dtypes"))

    def run(self, ctx: PassContext) -> PassResult:
        path = ctx.options.get("customize_dtypes")
        entries = load_customize_dtypes(path)
        view = ctx.view
        by_type = {}
        library = ctx.ops_library()
        for entry in entries:
            if entry.by_type:
                for tf_type in library.resolve_all(entry.name) or (entry.name,):
                    by_type.setdefault(tf_type, entry)
        marked = 0
        for node in view.nodes():
            entry = by_type.get(node.op)
            if entry is None:
                continue
            marked += _mark(ctx, node, path, entry)
        for entry in entries:
            if entry.by_type:
                continue
            node = view.get(entry.name)
            if node is None:
                close = difflib.get_close_matches(entry.name, [n.name for n in view.nodes()], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                ctx.report.warn(f"customize_dtypes file {path!r} line {entry.line}: no node is named "
                                f"{entry.name!r} in this graph{hint}; the line changes nothing here")
                continue
            marked += _mark(ctx, node, path, entry)
        return PassResult(changed=bool(marked), stats={"entries": len(entries), "marked": marked})


def _mark(ctx, node, path, entry) -> int:
    if node_dtype(node) not in (None, "float32"):
        ctx.report.warn(f"customize_dtypes file {path!r} line {entry.line}: {node.name} ({node.op}) is "
                        f"{node_dtype(node)}, not float32; it keeps that dtype")
    if KEEP_DTYPE_ATTR in node.attr and node.attr[KEEP_DTYPE_ATTR].b:
        return 0
    node.attr[KEEP_DTYPE_ATTR].b = True
    ctx.view.touch(node.name)
    record = ctx.report.nodes.get(node.name)
    if record is None:
        dtype = node_dtype(node)
        record = ctx.report.nodes[node.name] = NodeDecision(node.name, node.op, dtype_before=dtype, dtype_after=dtype)
    record.add_reason(reason("dtypes.customize", path=path, line=entry.line,
                             op_type=entry.name if entry.by_type else None))
    return 1
