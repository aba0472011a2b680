"""Function bodies alike but for names: one is worked out, the others get its result renamed.

Keras and tf.cond give every layer its own copies of the same branch and gradient functions. They
differ only in the function's name, its argument names, the argument attrs (`_user_specified_name`,
shapes) and resource shapes, the shapes Grappler records on a function (`FUNCTION_SHAPE_ATTRS`) and
the shape attrs of body nodes (`SHAPE_ATTRS`): ResNet-50's training graph has 318 functions and 6
bodies. A pass whose decisions read none of these (op types, dtypes, edges, devices and the other
attrs) decides one body per `alike_key` and maps its rewrite onto the others with `Renaming`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tensorflow.core.framework import function_pb2

__all__ = ["FUNCTION_SHAPE_ATTRS", "SHAPE_ATTRS", "alike_body", "alike_key", "Renaming"]


# The node attrs that hold shapes (of outputs, of elements, of placeholders): what alike bodies may differ in.
SHAPE_ATTRS = ("_output_shapes", "output_shapes", "shape", "shapes", "element_shape")
# The function attrs that hold shapes (Grappler adds the shapes its item's arguments had).
FUNCTION_SHAPE_ATTRS = ("_input_shapes",)


def _split(text: str) -> tuple[str, str, str]:
    """("^" or "", node part, the rest from the first ':') of a FunctionDef input or ret string."""
    control = "^" if text.startswith("^") else ""
    head, sep, tail = text[len(control):].partition(":")
    return control, head, sep + tail


def alike_key(fdef: function_pb2.FunctionDef, *context, body: bytes | None = None) -> bytes:
    """Equal for two FunctionDefs (with equal `context`) exactly when their bodies are alike.
    `body`: what stands for `alike_body(fdef)` when the caller has it (the shim's encoding, equal
    exactly when alike_body is; the keys of one run all come from one of the two)."""
    return repr(context).encode() + b"\0" + (alike_body(fdef) if body is None else body)


def alike_body(fdef: function_pb2.FunctionDef) -> bytes:
    """The body serialized without what alike bodies may differ in, arguments by position. The
    shim's AlikeEncoder (native/npu_optimizer.cc) encodes the same content its own way."""
    copy = function_pb2.FunctionDef()
    copy.CopyFrom(fdef)
    copy.signature.name = ""
    positional = {}
    for index, arg in enumerate(copy.signature.input_arg):
        positional[arg.name] = f"%{index}"
        arg.name = f"%{index}"
        del arg.handle_data[:]
    for arg in copy.signature.output_arg:
        del arg.handle_data[:]
    copy.arg_attr.clear()
    for name in FUNCTION_SHAPE_ATTRS:
        if name in copy.attr:
            del copy.attr[name]
    for node in copy.node_def:
        for position, text in enumerate(node.input):
            control, head, rest = _split(text)
            if head in positional:
                node.input[position] = control + positional[head] + rest
        attrs = node.attr
        for name in SHAPE_ATTRS:
            if name in attrs:
                del attrs[name]
    for key, text in copy.ret.items():
        control, head, rest = _split(text)
        if head in positional:
            copy.ret[key] = positional[head] + rest
    return copy.SerializeToString(deterministic=True)


class Renaming:
    """Names of a template body onto an alike member's: argument i becomes the member's argument i,
    and a node the pass added after an argument (`<argument>/...`, given by `derived`) follows it."""

    def __init__(self, template_args: Sequence[str], member: function_pb2.FunctionDef,
                 derived: Mapping[str, str] | None = None):
        """`template_args`: the template's argument names, in order; `derived`: {node the pass added:
        the argument or node its name was made from}."""
        self.member = member
        args = dict(zip(template_args, (arg.name for arg in member.signature.input_arg)))
        self.names = dict(args)
        for name, source in (derived or {}).items():
            if source in args and name.startswith(source + "/"):
                self.names[name] = args[source] + name[len(source):]

    def __call__(self, name: str) -> str:
        return self.names.get(name, name)

    def input(self, text: str) -> str:
        control, head, rest = _split(text)
        renamed = self.names.get(head)
        return text if renamed is None else control + renamed + rest

    def function(self, rewritten: function_pb2.FunctionDef) -> function_pb2.FunctionDef | None:
        """The member's FunctionDef from the template's `rewritten` one: the member's signature, function
        and argument attrs and shape attrs, names renamed. None when a renamed node would take a name in use."""
        member_nodes = {node.name: node for node in self.member.node_def}
        result = function_pb2.FunctionDef()
        result.CopyFrom(rewritten)
        result.signature.CopyFrom(self.member.signature)
        result.attr.clear()
        for name, value in self.member.attr.items():
            result.attr[name].CopyFrom(value)
        result.arg_attr.clear()
        for index, attrs in self.member.arg_attr.items():
            result.arg_attr[index].CopyFrom(attrs)
        result.resource_arg_unique_id.clear()
        result.resource_arg_unique_id.update(self.member.resource_arg_unique_id)
        seen = {arg.name for arg in self.member.signature.input_arg}
        names = self.names
        for node in result.node_def:
            if node.name in names:
                node.name = names[node.name]
            if node.name in seen:
                return None
            seen.add(node.name)
            for position, text in enumerate(node.input):
                control, head, rest = _split(text)
                if head in names:
                    node.input[position] = control + names[head] + rest
            original = member_nodes.get(node.name)
            if original is None:
                continue
            for name in SHAPE_ATTRS:
                if name in node.attr:
                    del node.attr[name]
                if name in original.attr:
                    node.attr[name].CopyFrom(original.attr[name])
        for key, text in list(result.ret.items()):
            result.ret[key] = self.input(text)
        return result
