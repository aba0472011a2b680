"""Which float32 tensors hold float16 values whatever the step, so that a float16 round trip of them
changes no bit and the rewrite leaves it out.

Rounding is idempotent: NpuSimRoundToFloat16 (or a Cast pair) of a value float16 represents exactly
gives that value back, bit for bit. The rewrite already knows which of its own outputs are rounded
(casts.Rewriter._output_state); this module finds the graph's constants of that kind: a float32 Const
whose every value float16 holds (the 0 and 1 of a gradient's zeros and ones, most often), ZerosLike
and OnesLike, a Fill, Identity, Reshape, ... that only moves such a value, and a OneHot of such on and
off values (a classifier's one-hot labels). The float16 round trip
of each of them, one kernel run per training step in an emulated GeOp, is a no-op.

Also a StackPopV2 whose stack only ever gets tensors the rewrite rounds (a v1 gradient loop pops the
forward loop's rounded activations): the pop gives back what was pushed, bit for bit.

Not here: NaN (the round trip gives the quiet NaN, whatever the payload), values float16 holds only
as bfloat16 rounding would (this is for float16 only), and Consts of more than `MAX_CONST_VALUES`
values (Grappler's constant folding folds their round trip away before a step runs).
"""

from __future__ import annotations

import numpy as np
from tensorflow.python.framework import tensor_util

from npu_sim_bridge.passes.precision.plan import FP32
from npu_sim_bridge.passes.precision.marks import ROUND_OP

MAX_CONST_VALUES = 1 << 16
MAX_DEPTH = 8  # ops moved through, from the consumer back to the constant
ALWAYS_FLOAT16 = frozenset({"ZerosLike", "OnesLike", ROUND_OP})
# Ops that give only values of their input `position` (the others are shapes, indices, sizes).
MOVES_INPUT = {"Identity": 0, "Snapshot": 0, "StopGradient": 0, "PreventGradient": 0, "Reshape": 0,
               "ExpandDims": 0, "Squeeze": 0, "BroadcastTo": 0, "Tile": 0, "Fill": 1,
               "Enter": 0}  # a while frame's Enter: a loop's start value (a gradient accumulator's zeros)
# Ops whose every value is one of these inputs' values: OneHot's on_value and off_value (a one-hot label).
SELECTS_INPUTS = {"OneHot": (2, 3)}


def holds_float16_values(view, node_name: str, port: int = 0, depth: int = 0) -> bool:
    """Whether output `port` of node `node_name` in `view` (a GraphView) is float32 and holds only
    values float16 represents exactly, in every step (see the module's text)."""
    if depth > MAX_DEPTH or port != 0:
        return False
    node = view.get(node_name)
    if node is None or node.op.startswith("_"):
        return False
    if node.op in ALWAYS_FLOAT16:
        return node.op == ROUND_OP or node.attr["T"].type == FP32
    if node.op == "Const":
        return _const_float16(node)
    if node.op in SELECTS_INPUTS:
        return node.attr["T"].type == FP32 and all(
            _input_float16(view, node_name, position, depth) for position in SELECTS_INPUTS[node.op])
    position = MOVES_INPUT.get(node.op)
    if position is None:
        return False
    return _input_float16(view, node_name, position, depth)


def _input_float16(view, node_name: str, position: int, depth: int) -> bool:
    """Whether input `position` of node `node_name` holds float16 values (holds_float16_values)."""
    inputs = view.input_texts(node_name)
    if position >= len(inputs) or inputs[position].startswith("^"):
        return False
    source, _, source_port = inputs[position].partition(":")
    if source_port and not source_port.isdigit():
        return False  # a function body's "node:output:index": only plain graph names are followed
    return holds_float16_values(view, source, int(source_port or 0), depth + 1)


def _const_float16(node) -> bool:
    if node.attr["dtype"].type != FP32:
        return False
    tensor = node.attr["value"].tensor
    shape = [dim.size for dim in tensor.tensor_shape.dim]
    if any(size < 0 for size in shape) or int(np.prod(shape, dtype=np.int64)) > MAX_CONST_VALUES:
        return False
    values = np.asarray(tensor_util.MakeNdarray(tensor), dtype=np.float32)
    if np.isnan(values).any():
        return False
    back = values.astype(np.float16).astype(np.float32)
    return bool(np.array_equal(back.view(np.uint32), values.view(np.uint32)))


# Ops a stack's handle passes through between its StackV2 and the pushes and pops (a v1 gradient loop's
# accumulator enters the forward frame and the gradient frame).
HANDLE_MOVERS = frozenset({"Enter", "Identity"})
HANDLE_READERS = frozenset({"StackPushV2", "StackPopV2", "StackCloseV2"})


def popped_float16_values(view, node_name: str, port: int, pushed_float16) -> bool:
    """Whether output `port` of node `node_name` is a StackPopV2 of float32 values that only gives back
    float16 values: a stack gives back what was pushed, bit for bit, and every push onto its stack (a
    v1 gradient loop's record of a forward value) pushes a tensor `pushed_float16(input text)` says
    holds float16 values (the rewrite rounded it). A stack whose handle goes anywhere else is not
    followed."""
    node = view.get(node_name)
    if node is None or node.op != "StackPopV2" or port != 0 or node.attr["elem_type"].type != FP32:
        return False
    stack = _stack_of(view, view.input_texts(node_name)[0])
    if stack is None:
        return False
    pushes = _pushes(view, stack)
    return bool(pushes) and all(pushed_float16(view.input_texts(push)[1]) for push in pushes)


def _stack_of(view, text: str) -> str | None:
    """The StackV2 whose handle input `text` reads, through Enters and Identities; else None."""
    for _ in range(MAX_DEPTH):
        source, _, source_port = text.partition(":")
        if text.startswith("^") or source_port not in ("", "0"):
            return None  # a function body's "node:output:index" is not followed either
        node = view.get(source)
        if node is None:
            return None
        if node.op == "StackV2":
            return source
        if node.op not in HANDLE_MOVERS:
            return None
        text = view.input_texts(source)[0]
    return None


def _pushes(view, stack: str) -> list[str] | None:
    """Every StackPushV2 onto `stack`, or None when its handle reaches a reader of another kind."""
    pushes, todo, seen = [], [stack], {stack}
    while todo:
        holder = todo.pop()
        for reader in view.consumers_of(holder):
            if reader in seen:
                continue
            seen.add(reader)
            texts = view.input_texts(reader)
            op = view.op(reader)
            if any(text.partition(":")[0] == holder and index != 0 for index, text in enumerate(texts)
                   if not text.startswith("^")) or op not in HANDLE_MOVERS | HANDLE_READERS:
                return None
            if op in HANDLE_MOVERS:
                todo.append(reader)
            elif op == "StackPushV2":
                pushes.append(reader)
    return pushes
