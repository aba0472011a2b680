"""Op categories the passes consult: control flow, variables, host-only, cube and heavy ops, pass-through.

One table per concept, as grappler's op_types.h keeps them: placement, partition, precision and
the model sweep read these sets instead of keeping their own. Names are TensorFlow op types.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- v1 control flow
ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})
# Edges out of these ops close the loops of v1 while frames; they are the only legal cycles.
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
LOOP_COND_OPS = frozenset({"LoopCond"})
V1_CONTROL_FLOW_OPS = (ENTER_OPS | EXIT_OPS | SWITCH_OPS | MERGE_OPS | NEXT_ITERATION_OPS | LOOP_COND_OPS
                       | frozenset({"ControlTrigger"}))

# --------------------------------------------------------------------------- functional control flow
FUNCTIONAL_CONTROL_FLOW_OPS = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})
GEOP_KERNEL_OP = "NpuSimGeOp"  # a GeOp's call run as one single-device function (native/geop.cc)
# Ops that call their function attr `f` with inputs Tin and outputs Tout.
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", GEOP_KERNEL_OP})
# Ops whose func-valued attrs name bodies that run as part of the graph (dataset functions run on
# the host input pipeline and are not among them).
CALLING_OPS = FUNCTIONAL_CONTROL_FLOW_OPS | CALL_OPS
# Ops that run a library function: the calling ops and SymbolicGradient.
FUNCTION_RUNNING_OPS = CALLING_OPS | frozenset({"SymbolicGradient"})

# --------------------------------------------------------------------------- graph edges and variables
GRAPH_INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
RUNTIME_OPS = frozenset({"_Arg", "_Retval", "_Recv", "_Send", "_HostRecv", "_HostSend",
                         "_DeviceArg", "_DeviceRetval"})
FUNCTION_EDGE_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
# The executor's own nodes and the function edges: a step trace leaves them out.
EXECUTOR_PLUMBING_OPS = FUNCTION_EDGE_OPS | frozenset({"_SOURCE", "_SINK", "NoOp"})
# Where a value enters a graph or function body (precision starts its votes there), and where one leaves it.
VALUE_SOURCE_OPS = frozenset({"_Arg", "_DeviceArg", "Const", "HostConst"}) | GRAPH_INPUT_OPS
VALUE_SINK_OPS = frozenset({"_Retval", "_DeviceRetval"})
VARIABLE_OPS = frozenset({
    "VarHandleOp", "_VarHandlesOp", "VariableV2", "Variable", "TemporaryVariable", "DestroyTemporaryVariable",
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2",
})
# Variables proper (no tables): what a checkpoint restores.
VARIABLE_VALUE_OPS = frozenset({"VariableV2", "VarHandleOp", "Variable", "VarHandleOpV2"})
# Ref variables (TF1's VariableV2): their consumers hold references, not values.
REF_VARIABLE_OPS = frozenset({"VariableV2", "Variable"})

# --------------------------------------------------------------------------- host-only ops
PY_FUNC_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
CHECKPOINT_OPS = frozenset({
    "SaveV2", "Save", "SaveSlices", "RestoreV2", "Restore", "RestoreSlice", "MergeV2Checkpoints",
    "ShardedFilename", "ShardedFilespec", "ReadFile", "WriteFile", "MatchingFiles",
})
# String tensors these ops take or give carry no string computation (messages, constants).
STRING_CARRIER_OPS = frozenset({"Const", "Assert", "Identity", "NoOp"})


def is_summary(op: str) -> bool:
    return "Summary" in op


def is_data_input(op: str) -> bool:
    return "Dataset" in op or "Iterator" in op


def is_queue(op: str) -> bool:
    return "Queue" in op or op.startswith("Barrier") or op in ("Stage", "Unstage", "MapStage")


# --------------------------------------------------------------------------- variant tensors
# Variant values these ops make or take are plain tensors a function call can pass (unlike a
# dataset or iterator variant, which lives in the host input pipeline).
_PASSABLE_VARIANT_PREFIXES = ("Optional", "TensorList", "EmptyTensorList")


def makes_passable_variant(op: str) -> bool:
    """True for Optional and TensorList ops, whose variant outputs may cross a function call."""
    return op.startswith(_PASSABLE_VARIANT_PREFIXES)


# --------------------------------------------------------------------------- pass-through ops
# Ops that forward their input's value unchanged (the precision gray rule looks through them).
PASS_THROUGH_OPS = frozenset({
    "Identity", "Snapshot", "StopGradient", "PreventGradient", "IdentityN", "EnsureShape",
    "Squeeze", "ExpandDims", "Enter", "Exit", "Merge", "Switch", "NextIteration",
})
# Ops that do no arithmetic: a GeOp made only of them is not worth its call.
BOOKKEEPING_OPS = frozenset({"Identity", "IdentityN", "NoOp", "Snapshot", "StopGradient"})

# --------------------------------------------------------------------------- cube and heavy ops
# Ops that run on the cube unit (matrix multiply and convolution, forward and backward).
CUBE_OPS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
    "Conv3D", "Conv3DBackpropInput", "Conv3DBackpropFilter", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
})
# Grappler's remapper and the fusion pass fuse a base op with its epilogue; they compute what the base op does.
FUSED_BASE_OPS = {
    "_FusedConv2D": "Conv2D", "_FusedMatMul": "MatMul", "_FusedDepthwiseConv2dNative": "DepthwiseConv2dNative",
    "_FusedConv3D": "Conv3D", "_FusedBatchNormEx": "FusedBatchNormV3",
}
BATCH_NORM_OPS = frozenset({
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
    "FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3",
})
# The ops whose placement decides a model's speed: cube ops and batch norms, forward and backward.
# The precision pass's float16 rounding as one kernel (native/npu_ops.cc): float32 in, float32 out holding exactly
# what Cast(float32 -> float16) then Cast(float16 -> float32) give; it runs where the Casts it stands for run.
ROUND_OP = "NpuSimRoundToFloat16"
# The fused ops the fusion pass itself makes (its rules; Grappler's remapper makes the others above).
PASS_FUSED_BASE_OPS = {"_FusedMatMul": "MatMul", "_FusedConv2D": "Conv2D"}
HEAVY_OPS = CUBE_OPS | BATCH_NORM_OPS | frozenset(FUSED_BASE_OPS)


def is_heavy(op: str) -> bool:
    return op in HEAVY_OPS
