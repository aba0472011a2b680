"""One channels-first op laid out for the CPU: the NodeDefs that run it channels-last between Transposes.

For an op O in NCHW (NCDHW) the rewrite makes
    O/npu_sim_layout/perm_in, perm_out   Const int32: the permutations to and from the target layout
    O/npu_sim_layout/input_<i>           Transpose of each activation input to NHWC (NDHWC), or
                                         DataFormatVecPermute of each shape/window vector input
    O/npu_sim_layout/nhwc                O itself in the target layout (attrs permuted), reading those
and O becomes the Transpose of that node's output back to the source layout, under O's name, so its
readers, fetches, dumps and report record are unchanged (an op with more outputs, a batch norm,
becomes an IdentityN of that Transpose, O/npu_sim_layout/output_0, and its other outputs). An op
whose output is no activation (a filter gradient) keeps its name and is rewritten in place: no
Transpose back. The Consts take a control input from the node that feeds O's first activation, so
that in v1 control flow they live in O's frame (a Const without inputs lives in the root frame; the
GeOp bodies hold whole while frames).

The caller says how an input names a node's output (a graph: "name" or "name:port"; a function body:
"name:output_arg:0") with `ref`, and which names are taken with `taken`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tensorflow.core.framework import attr_value_pb2, node_def_pb2, types_pb2
from tensorflow.python.framework import op_def_registry

from npu_sim_bridge.passes.layout.ops import FORMATS, OPS, permuted, permuted_pairs, source_format

SCOPE = "npu_sim_layout"


@dataclasses.dataclass
class LaidOut:
    """The rewrite of one op: the nodes to add (in an order where each reads only earlier ones or the
    graph's), O's replacement (same name), and the formats."""

    op: str
    added: list[node_def_pb2.NodeDef]
    replacement: node_def_pb2.NodeDef
    source: str
    target: str
    transposed_back: bool
    twin: str = ""  # the input text of the target-layout output the Transpose back reads ("" where none)
    perm_out: str = ""  # the name of the Const holding the permutation back


def dtype_of(node, arg) -> int:
    """The dtype of one OpDef arg of `node`: fixed, or the type attr's value (None if unresolved)."""
    if arg.type != types_pb2.DT_INVALID:
        return arg.type
    value = node.attr.get(arg.type_attr) if arg.type_attr else None
    return value.type if value is not None and value.WhichOneof("value") == "type" else None


def resolvable(node) -> bool:
    """Whether the types of every port the rewrite touches are known (not attrs of a parametrized
    function body)."""
    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return False
    layout = OPS[node.op]
    ports = [op_def.input_arg[i] for i in layout.tensors + layout.vectors] + list(op_def.output_arg)
    if any(arg.number_attr or arg.type_list_attr for arg in op_def.output_arg):
        return False  # the rewrite names outputs one per arg
    return all(dtype_of(node, arg) is not None for arg in ports)


def first_activation(node) -> str:
    """The input text of `node`'s first activation input (whose producer anchors the Consts)."""
    data = [text for text in node.input if not text.startswith("^")]
    return data[OPS[node.op].tensors[0]]


def lay_out(node, ref: Callable[[str, str, int], str], taken: Callable[[str], bool],
            anchor: str | None) -> LaidOut:
    """The rewrite of `node` (a NodeDef with source_format(node) set; see the module docstring).

    `ref(name, output_arg, port)`: how an input names output `port` of node `name`, the only output of
    its arg `output_arg`. `taken(name)`: whether a name is in use. `anchor`: the node the Consts take a
    control input from (the producer of `first_activation(node)`), or None where it is none (a
    function's argument: the op is then in the body's root frame).
    """
    source, target, perm_in, perm_out = FORMATS[source_format(node)]
    layout = OPS[node.op]
    op_def = op_def_registry.get(node.op)
    device = node.device
    names: set[str] = set()

    def fresh(suffix: str) -> str:
        base = f"{node.name}/{SCOPE}/{suffix}"
        name, count = base, 1
        while taken(name) or name in names:
            name, count = f"{base}_{count}", count + 1
        names.add(name)
        return name

    added: list[node_def_pb2.NodeDef] = []
    data = [text for text in node.input if not text.startswith("^")]
    controls = [text for text in node.input if text.startswith("^")]
    controls_of_consts = [f"^{anchor}"] if anchor else []
    perm_in_name = _const(added, fresh("perm_in"), perm_in, device, controls_of_consts)
    inputs = list(data)
    for index in layout.tensors:
        dtype = dtype_of(node, op_def.input_arg[index])
        added.append(_node(fresh(f"input_{index}"), "Transpose", [data[index], ref(perm_in_name, "output", 0)],
                           device, T=_type(dtype), Tperm=_type(types_pb2.DT_INT32)))
        inputs[index] = ref(added[-1].name, "y", 0)
    for index in layout.vectors:
        dtype = dtype_of(node, op_def.input_arg[index])
        added.append(_node(fresh(f"input_{index}"), "DataFormatVecPermute", [data[index]], device,
                           T=_type(dtype), src_format=attr_value_pb2.AttrValue(s=source),
                           dst_format=attr_value_pb2.AttrValue(s=target)))
        inputs[index] = ref(added[-1].name, "y", 0)

    running = node_def_pb2.NodeDef()
    running.CopyFrom(node)
    del running.input[:]
    running.input.extend(inputs + controls)
    running.attr["data_format"].s = target
    for key in layout.lists:
        if key in running.attr and len(running.attr[key].list.i) == len(perm_in):
            values = permuted(list(running.attr[key].list.i), perm_in)
            running.attr[key].list.ClearField("i")
            running.attr[key].list.i.extend(values)
    paddings = running.attr.get("explicit_paddings")
    if paddings is not None and len(paddings.list.i) == 2 * len(perm_in):
        values = permuted_pairs(list(paddings.list.i), perm_in)
        paddings.list.ClearField("i")
        paddings.list.i.extend(values)
    if not layout.output:
        return LaidOut(node.op, added, running, source.decode(), target.decode(), transposed_back=False)

    running.name = fresh("nhwc" if len(perm_in) == 4 else "ndhwc")
    added.append(running)
    perm_out_name = _const(added, fresh("perm_out"), perm_out, device, controls_of_consts, before=running)
    outputs = op_def.output_arg
    transpose = dict(T=_type(dtype_of(node, outputs[0])), Tperm=_type(types_pb2.DT_INT32))
    back_input = [ref(running.name, outputs[0].name, 0), ref(perm_out_name, "output", 0)]
    if len(outputs) == 1:
        back = transpose_node(node.name, *back_input, device, dtype_of(node, outputs[0]))
        return LaidOut(node.op, added, back, source.decode(), target.decode(), transposed_back=True,
                       twin=back_input[0], perm_out=perm_out_name)
    # Several outputs (a batch norm's statistics, which have no layout): O becomes an IdentityN of the
    # transposed activation and the other outputs as they are, port for port.
    added.append(_node(fresh("output_0"), "Transpose", back_input, device, **transpose))
    types = attr_value_pb2.AttrValue()
    types.list.type.extend(dtype_of(node, arg) for arg in outputs)
    back = _node(node.name, "IdentityN", [ref(added[-1].name, "y", 0)] +
                 [ref(running.name, arg.name, port) for port, arg in enumerate(outputs) if port], device, T=types)
    return LaidOut(node.op, added, back, source.decode(), target.decode(), transposed_back=True,
                   twin=back_input[0], perm_out=perm_out_name)


def transpose_node(name: str, tensor: str, perm: str, device: str, dtype: int) -> node_def_pb2.NodeDef:
    """A Transpose of `tensor` (of `dtype`) by the int32 permutation `perm` (input texts)."""
    return _node(name, "Transpose", [tensor, perm], device, T=_type(dtype), Tperm=_type(types_pb2.DT_INT32))


def perm_const(name: str, rank: int, device: str, anchor: str) -> node_def_pb2.NodeDef:
    """The int32 Const of the permutation from the target layout of `rank` dimensions back to the source
    layout, with a control input from `anchor` (its frame's node)."""
    added: list = []
    _const(added, name, next(back for _, _, to, back in FORMATS.values() if len(to) == rank), device, [f"^{anchor}"])
    return added[0]


def _type(dtype: int) -> attr_value_pb2.AttrValue:
    return attr_value_pb2.AttrValue(type=dtype)


def _node(name: str, op: str, inputs: list[str], device: str, **attrs) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name=name, op=op, device=device)
    node.input.extend(inputs)
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


def _const(added: list, name: str, values, device: str, anchor: list[str], before=None) -> str:
    tensor = attr_value_pb2.AttrValue()
    tensor.tensor.dtype = types_pb2.DT_INT32
    tensor.tensor.tensor_shape.dim.add().size = len(values)
    tensor.tensor.int_val.extend(values)
    const = _node(name, "Const", anchor, device, dtype=_type(types_pb2.DT_INT32), value=tensor)
    if before is None:
        added.append(const)
    else:
        added.insert(added.index(before), const)
    return name
