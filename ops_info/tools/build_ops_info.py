"""Generates the simulated Ascend 910 operator library (ops_info/*.json) from the reference facts file."""

# Usage: python ops_info/tools/build_ops_info.py shared/reference/ascend910_facts.json [--out DIR]
#
# The facts give, per Ascend IR op type, precision_reduce and the float dtypes of input 0, the IR -> TF
# renames and the TF op types the adapter can sink. The script writes into DIR (default: the ops_info/
# folder it lives in) aic-ascend910-ops-info.json (the op library, in the real file's shape),
# npu_supported_ops.json (the adapter's list, in its real shape) and tf_ir_op_map.json (TF op type -> IR
# op types in preference order, plus the documented not_compute and no_op_info sections). The output is
# deterministic. TensorFlow is imported only to ask its op registry which names are TF op types.

import argparse
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.dirname(_HERE)

OP_INFO_FILE = "aic-ascend910-ops-info.json"
SUPPORTED_FILE = "npu_supported_ops.json"
MAP_FILE = "tf_ir_op_map.json"

# Ops whose first input accepts no float dtype (facts: input0_float_dtypes == []). The facts only say
# "no float"; the integer/bool dtypes written here are those of the op's first input in the public CANN
# operator prototypes (shape, index, axis, condition or quantised data inputs). The build checks that this
# table names exactly the ops the facts list with [] so that a new facts file cannot slip past it.
_INT_TYPES = "int8,int16,int32,int64,uint8,uint16,uint32,uint64"
NON_FLOAT_INPUT0 = {
    "Aipp": "uint8",
    "AscendAntiQuant": "int8",
    "AscendDequant": "int32",
    "AscendWeightQuant": "int8",
    "AvgPool3DGrad": "int32",
    "AvgPoolGrad": "int32",
    "BitwiseAnd": _INT_TYPES,
    "BitwiseOr": _INT_TYPES,
    "BitwiseXor": _INT_TYPES,
    "Concat": "int32",
    "ConcatOffset": "int32",
    "ConcatOffsetD": "int32",
    "Conv2DBackpropInput": "int32",
    "Conv2DTranspose": "int32",
    "Conv3DBackpropInput": "int32",
    "Conv3DTranspose": "int32",
    "DataFormatDimMap": "int32,int64",
    "DenseBincount": "int32,int64",
    "DepthwiseConv2DBackpropInput": "int32",
    "Dequantize": "int8,uint8,int32",
    "Fill": "int32,int64",
    "Gcd": "int32,int64",
    "Invert": _INT_TYPES,
    "LogicalAnd": "bool",
    "LogicalNot": "bool",
    "LogicalOr": "bool",
    "MapIndex": "int32",
    "OneHot": "uint8,int32,int64",
    "OneHotD": "uint8,int32,int64",
    "PopulationCount": _INT_TYPES,
    "RaggedBinCount": "int64",
    "ReduceAll": "bool",
    "ReduceAllD": "bool",
    "ReduceAny": "bool",
    "ReduceAnyD": "bool",
    "RnnGenMask": "int32",
    "RnnGenMaskV2": "int32",
    "ScatterNd": "int32,int64",
    "ScatterNdD": "int32,int64",
    "SelectV2": "bool",
    "SignBitsUnpack": "uint8",
    "SparseBincount": "int64",
    "SparseReshape": "int64",
    "Split": "int32",
    "StridedSliceGrad": "int32,int64",
    "SubSampleLabels": "int32",
}

# seed_facts entries this script knows how to apply: op -> the only float dtype its first input takes.
SEED_FLOAT_ONLY = {"Conv2D": "float16"}

# Const-to-attr variants ("D" ops). GE rewrites an IR op whose shape/axis/size inputs are constants into
# its "D" form before operator selection (fusion passes ConstToAttrPass, ConstToAttrReduceSumFusion,
# ConstToAttrGatherV2Fusion, TileConstToAttrFusion, ...; Ascend docs: ReduceSum becomes ReduceSumD in
# static shapes, and the documented mixlist entry to keep TF Sum in float32 is "ReduceSumD"). So the D form
# is what the precision lists see, and it is listed first. The generic rule is "<IR>D exists in the
# library"; these are the registered pairs that do not follow the naming rule.
CONST_TO_ATTR_EXTRA = {
    "ApplyMomentum": "ApplyMomentumD",
    "ArgMaxV2": "ArgMaxD",
    "ClipBoxes": "ClipBoxesD",
    "CropAndResize": "CropAndResizeD",
    "Cumprod": "CumprodD",
    "CumulativeLogsumexp": "CumulativeLogsumexpD",
    "FillV2": "FillV2D",
    "InTopK": "InTopKD",
    "InplaceAdd": "InplaceAddD",
    "InplaceSub": "InplaceSubD",
    "MaxPoolV2": "MaxPoolExt2",
    "RpnProposals": "RpnProposalsD",
    "StridedSliceAssign": "StridedSliceAssignD",
    "TopK": "TopKD",
}
# Pairs that look like const-to-attr by name but are different operators.
NOT_CONST_TO_ATTR = {"Relu6D"}  # Relu6D is Relu6 with a scale attribute, not Relu6 with a constant input

# TF op type -> IR op types the TF parser produces, beyond "same name" and the facts' renames.
# Each entry states its public source. The D forms of these are added by the const-to-attr rule.
EXTRA_TF_TO_IR = {
    "MatMul": (["MatMulV2", "MatMul"], "TF parser plugin registers IR MatMulV2 with origin op type MatMul"),
    "FusedBatchNorm": (["BatchNorm", "BNTrainingReduce", "BNTrainingUpdate"],
                       "IR BatchNorm is TF FusedBatchNormV2 (facts rename); V1/V3 are the same op; in "
                       "training GE splits BatchNorm into BNTrainingReduce + BNTrainingUpdate"),
    "FusedBatchNormV2": (["BatchNorm", "BNTrainingReduce", "BNTrainingUpdate"], "facts rename + BN training split"),
    "FusedBatchNormV3": (["BatchNorm", "BNTrainingReduce", "BNTrainingUpdate"],
                         "same operator as FusedBatchNormV2 with a reserve output; see FusedBatchNorm"),
    "FusedBatchNormGrad": (["BatchNormGrad", "BNTrainingReduceGrad", "BNTrainingUpdateGrad"],
                           "IR BatchNormGrad is TF FusedBatchNormGradV2 (facts rename) and FusedBatchNormGradV3 "
                           "(TF parser plugin); GE splits it into BNTrainingReduceGrad + BNTrainingUpdateGrad"),
    "FusedBatchNormGradV2": (["BatchNormGrad", "BNTrainingReduceGrad", "BNTrainingUpdateGrad"], "facts rename"),
    "FusedBatchNormGradV3": (["BatchNormGrad", "BNTrainingReduceGrad", "BNTrainingUpdateGrad"],
                             "TF parser plugin registers IR BatchNormGrad with origin op type FusedBatchNormGradV3"),
    "DepthwiseConv2dNative": (["DepthwiseConv2D"], "TF parser plugin: DepthwiseConv2D <- DepthwiseConv2dNative"),
    "DepthwiseConv2dNativeBackpropFilter": (["DepthwiseConv2DBackpropFilter"],
                                            "TF parser plugin: DepthwiseConv2DBackpropFilter <- "
                                            "DepthwiseConv2dNativeBackpropFilter"),
    "DepthwiseConv2dNativeBackpropInput": (["DepthwiseConv2DBackpropInput"],
                                           "same kind as DepthwiseConv2dNativeBackpropFilter"),
    "Conv3DBackpropFilterV2": (["Conv3DBackpropFilter"], "TF V2 form (filter_sizes input) of Conv3DBackpropFilter"),
    "Conv3DBackpropInputV2": (["Conv3DBackpropInput"], "TF V2 form (input_sizes input) of Conv3DBackpropInput"),
    "Einsum": (["EinSum"], "TF parser plugin registers IR EinSum with origin op type Einsum "
                           "(not in this op library: see no_op_info)"),
    "BatchMatMulV3": (["BatchMatMulV2"], "TF BatchMatMulV3 is BatchMatMulV2 with separate input/output dtype "
                                         "attributes (Ta, Tb, Tout)"),
    "AssignVariableOp": (["Assign"], "resource-variable form of Assign"),
    "AssignAddVariableOp": (["AssignAdd"], "resource-variable form of AssignAdd"),
    "AssignSubVariableOp": (["AssignSub"], "resource-variable form of AssignSub"),
}

# TF op types that are not compute ops: graph plumbing the precision lists never apply to. The value is
# the kind; the kinds are documented in the map file's "_about".
NOT_COMPUTE = {
    "Const": "source", "Placeholder": "source", "PlaceholderWithDefault": "source", "PlaceholderV2": "source",
    "VarHandleOp": "variable", "VariableV2": "variable", "Variable": "variable", "ReadVariableOp": "variable",
    "VarIsInitializedOp": "variable", "IsVariableInitialized": "variable", "VariableShape": "variable",
    "DestroyResourceOp": "variable", "TemporaryVariable": "variable", "DestroyTemporaryVariable": "variable",
    "ExpandDims": "pass_through", "Squeeze": "pass_through", "StopGradient": "pass_through",
    "PreventGradient": "pass_through", "Snapshot": "pass_through", "IdentityN": "pass_through",
    "EnsureShape": "pass_through", "RefIdentity": "pass_through",
    "Exit": "control_flow", "RefExit": "control_flow", "RefEnter": "control_flow",
    "RefNextIteration": "control_flow", "LoopCond": "control_flow",
    "ControlTrigger": "control_flow", "While": "control_flow", "StatelessWhile": "control_flow",
    "If": "control_flow", "StatelessIf": "control_flow", "Case": "control_flow", "StatelessCase": "control_flow",
    "PartitionedCall": "control_flow", "StatefulPartitionedCall": "control_flow",
    "OptionalFromValue": "container", "OptionalGetValue": "container", "OptionalNone": "container",
    "OptionalHasValue": "container",
    "TensorArrayV3": "container", "TensorArrayReadV3": "container", "TensorArrayWriteV3": "container",
    "TensorArrayGatherV3": "container", "TensorArrayScatterV3": "container", "TensorArraySizeV3": "container",
    "TensorArrayGradV3": "container", "TensorArrayConcatV3": "container", "TensorArraySplitV3": "container",
    "TensorArrayCloseV3": "container",
    "StackV2": "container", "StackPushV2": "container", "StackPopV2": "container", "StackCloseV2": "container",
    "EmptyTensorList": "container", "TensorListReserve": "container", "TensorListFromTensor": "container",
    "TensorListGetItem": "container", "TensorListSetItem": "container", "TensorListStack": "container",
    "TensorListPushBack": "container", "TensorListPopBack": "container", "TensorListLength": "container",
    "TensorListElementShape": "container", "TensorListConcatV2": "container", "TensorListSplit": "container",
    "TensorListGather": "container", "TensorListScatterIntoExistingList": "container",
    "ShapeN": "shape", "Size": "shape", "Rank": "shape", "BroadcastGradientArgs": "shape",
    "BroadcastArgs": "shape", "InvertPermutation": "shape", "TensorListResize": "container",
    "NoOp": "no_op", "Assert": "no_op",
}

# TF op types that compute but have no entry in this AI Core op library. They get no list colour and no
# dtype restriction here: the simulator keeps the dtype the script gave them. Whether they run on the
# device (AI CPU) or the host is decided by npu_supported_ops.json.
NO_OP_INFO = {
    "Einsum": "parsed to IR EinSum, which this AI Core op library does not list",
    "SparseSoftmaxCrossEntropyWithLogits": "no AI Core entry of this name; the toolchain rewrites it into "
                                           "OneHot + SoftmaxCrossEntropyWithLogits (both listed) or runs it on AI CPU",
    "RandomUniform": "random number generator (AI CPU); produces its declared dtype",
    "RandomStandardNormal": "random number generator (AI CPU); produces its declared dtype",
    "TruncatedNormal": "random number generator (AI CPU); produces its declared dtype",
    "StatelessRandomUniformV2": "random number generator (AI CPU); produces its declared dtype",
    "StatelessRandomNormalV2": "random number generator (AI CPU); produces its declared dtype",
    "StatelessTruncatedNormalV2": "random number generator (AI CPU); produces its declared dtype",
    "StatelessRandomGetKeyCounter": "random seed plumbing (AI CPU); integer outputs",
    "Qr": "linear algebra (AI CPU); used by the orthogonal initializer",
    "Unique": "index deduplication (AI CPU)",
    "DynamicStitch": "index-driven data movement (AI CPU)",
}


def _fail(message):
    sys.stderr.write("build_ops_info: " + message + "\n")
    raise SystemExit(2)


def _load_facts(path):
    try:
        with open(path, encoding="utf-8") as handle:
            facts = json.load(handle)
    except OSError as exc:
        _fail(f"cannot read facts file {path}: {exc.strerror}")
    except json.JSONDecodeError as exc:
        _fail(f"facts file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}")
    for key in ("aicore_ops_ascend910", "ir_to_tf_renames", "npu_supported_tf_ops", "seed_facts"):
        if key not in facts:
            _fail(f"facts file {path} has no {key!r} section")
    return facts


def _tf_op_registry():
    """Returns (is_tf_op(name), op_def(name) -> OpDef | None, names of the ops tf.raw_ops exposes)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # heavy import, only at build time; it also registers the op library
    from tensorflow.python.framework import op_def_registry

    names = {name for name in dir(tf.raw_ops) if name[:1].isupper()}
    return (lambda name: op_def_registry.get(name) is not None), op_def_registry.get, names


def _d_form(ir_type, library):
    if ir_type in CONST_TO_ATTR_EXTRA and CONST_TO_ATTR_EXTRA[ir_type] in library:
        return CONST_TO_ATTR_EXTRA[ir_type]
    candidate = ir_type + "D"
    if candidate in library and candidate not in NOT_CONST_TO_ATTR:
        return candidate
    return None


def _expand(bases, library):
    """IR bases in order -> candidates in preference order: each base's D form, then the base itself."""
    result = []
    for base in bases:
        for ir_type in (_d_form(base, library), base):
            if ir_type and ir_type in library and ir_type not in result:
                result.append(ir_type)
    return result


def build_map(facts, is_tf_op, tf_registry_names):
    library = facts["aicore_ops_ascend910"]
    renames = facts["ir_to_tf_renames"]
    supported = set(facts["npu_supported_tf_ops"])

    renamed_ir = {ir_type for ir_type, tf_type in renames.items() if ir_type != tf_type}
    # TF op types: TensorFlow's registry, the adapter's list (less the IR names it lists that are renamed
    # forms of another TF op, e.g. ReduceMean is TF Mean), the facts' rename targets and the extras.
    tf_names = set(tf_registry_names) | {name for name in renames.values()} | set(EXTRA_TF_TO_IR)
    tf_names |= {name for name in supported if not (name in renamed_ir and not is_tf_op(name))}

    bases = {tf_type: [] for tf_type in tf_names}  # TF type -> IR bases in order
    for tf_type, (ir_list, _source) in EXTRA_TF_TO_IR.items():
        bases[tf_type].extend(ir_list)
    for ir_type, tf_type in sorted(renames.items()):
        if ir_type not in bases[tf_type]:
            bases[tf_type].append(ir_type)
    for tf_type in tf_names:
        if tf_type not in bases[tf_type] and not (tf_type in renamed_ir and not is_tf_op(tf_type)):
            bases[tf_type].append(tf_type)

    tf_to_ir = {}
    for tf_type in sorted(bases):
        if tf_type.startswith("Resource") and tf_type not in EXTRA_TF_TO_IR:
            continue  # resource-variable forms are mapped below, from their ref-variable form
        candidates = _expand(bases[tf_type], library)
        if tf_type in EXTRA_TF_TO_IR:
            # keep the documented IR names even when this library lacks them (a CANN library may have them)
            candidates += [b for b in EXTRA_TF_TO_IR[tf_type][0] if b not in candidates and b not in library]
        if candidates:
            tf_to_ir[tf_type] = candidates

    # Resource-variable forms: ResourceApplyAdam does what ApplyAdam does on a resource handle, etc.
    for tf_type in sorted(name for name in tf_names if name.startswith("Resource")):
        if tf_type in tf_to_ir:
            continue
        ref_form = tf_type[len("Resource"):]
        candidates = tf_to_ir.get(ref_form) or _expand([ref_form], library)
        if candidates:
            tf_to_ir[tf_type] = list(candidates)
    tf_to_ir = dict(sorted(tf_to_ir.items()))

    overlap = sorted(set(tf_to_ir) & set(NOT_COMPUTE))
    if overlap:
        _fail(f"op types both mapped to the library and listed as not compute: {overlap}")
    notes = {tf_type: source for tf_type, (_ir, source) in sorted(EXTRA_TF_TO_IR.items())}
    return {
        "_about": [
            "TensorFlow op type <-> Ascend IR op type map of the simulated Ascend 910 operator library.",
            "Generated by ops_info/tools/build_ops_info.py from shared/reference/ascend910_facts.json.",
            "tf_to_ir: TF op type -> IR op types in preference order; the first one present in the loaded "
            "op library gives the op its list colour and dtypes. Same-name IR ops, the facts' IR->TF "
            "renames, the const-to-attr 'D' forms (listed first: GE turns ReduceSum with constant axes into "
            "ReduceSumD before the precision lists apply) and the entries explained in _notes.",
            "Resource-variable TF ops (ResourceApplyAdam, ResourceGather, ...) map like their ref-variable "
            "forms (ApplyAdam, Gather, ...).",
            "not_compute: TF op types that do no arithmetic; kinds: source (constant or fed value), "
            "variable (handles, reads, initialisation checks), pass_through (forwards its input, dtype "
            "follows it), control_flow (frames, functional control flow, calls), container (TensorArray, "
            "TensorList, Stack, Optional), shape (shape/size/index arithmetic), no_op.",
            "no_op_info: TF op types that compute but have no entry in this AI Core op library; they keep "
            "the dtype the script gave them (no list colour is invented for them).",
        ],
        "_notes": notes,
        "tf_to_ir": tf_to_ir,
        "not_compute": dict(sorted(NOT_COMPUTE.items())),
        "no_op_info": dict(sorted(NO_OP_INFO.items())),
    }


def build_op_info(facts, tf_to_ir, op_def):
    library = facts["aicore_ops_ascend910"]
    seed = facts["seed_facts"]
    for op, dtype in SEED_FLOAT_ONLY.items():
        if op not in seed or f"{dtype} only" not in seed[op]:
            _fail(f"seed fact for {op} ({dtype} only) is not in the facts file")
    empty = sorted(op for op, entry in library.items() if entry["input0_float_dtypes"] == [])
    if empty != sorted(NON_FLOAT_INPUT0):
        missing = sorted(set(empty) - set(NON_FLOAT_INPUT0))
        extra = sorted(set(NON_FLOAT_INPUT0) - set(empty))
        _fail(f"NON_FLOAT_INPUT0 is out of step with the facts: missing {missing}, not in facts {extra}")

    tf_of_ir = {}
    for tf_type, ir_list in sorted(tf_to_ir.items()):
        for ir_type in ir_list:
            tf_of_ir.setdefault(ir_type, tf_type)

    result = {}
    for ir_type in sorted(library):
        entry = library[ir_type]
        info = {}
        if entry["precision_reduce"] is True:
            info["precision_reduce"] = {"flag": "true"}
        elif entry["precision_reduce"] is False:
            info["precision_reduce"] = {"flag": "false"}
        elif entry["precision_reduce"] is not None:
            _fail(f"op {ir_type}: precision_reduce must be true, false or null")
        floats = entry["input0_float_dtypes"]
        if ir_type in SEED_FLOAT_ONLY:
            floats = [SEED_FLOAT_ONLY[ir_type]]
        input0 = {"name": "x"}
        if floats is None:
            pass  # no dtype list: decided at compile time
        elif not floats:
            input0["dtype"] = NON_FLOAT_INPUT0[ir_type]
        else:
            input0["dtype"] = ",".join(floats)
        info["input0"] = input0
        output0 = {"name": "y"}
        if floats and _output_follows_input(op_def, tf_of_ir.get(ir_type, ir_type)):
            output0["dtype"] = input0["dtype"]
        info["output0"] = output0
        result[ir_type] = info
    return result


def _output_follows_input(op_def, tf_type):
    """True when TF's definition of the op gives output 0 the same type attribute as input 0."""
    definition = op_def(tf_type)
    if definition is None or not definition.input_arg or not definition.output_arg:
        return False
    first_in, first_out = definition.input_arg[0], definition.output_arg[0]
    return bool(first_in.type_attr) and first_in.type_attr == first_out.type_attr


def build_supported(facts):
    return {op: {"isGray": False, "isHeavy": False} for op in sorted(set(facts["npu_supported_tf_ops"]))}


def _write(path, data):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Generate ops_info/*.json from the Ascend 910 facts file.")
    parser.add_argument("facts", help="path to ascend910_facts.json")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)

    facts = _load_facts(args.facts)
    is_tf_op, op_def, registry_names = _tf_op_registry()
    op_map = build_map(facts, is_tf_op, registry_names)
    op_info = build_op_info(facts, op_map["tf_to_ir"], op_def)
    supported = build_supported(facts)

    os.makedirs(args.out, exist_ok=True)
    _write(os.path.join(args.out, OP_INFO_FILE), op_info)
    _write(os.path.join(args.out, SUPPORTED_FILE), supported)
    _write(os.path.join(args.out, MAP_FILE), op_map)

    flags = [entry.get("precision_reduce", {}).get("flag") for entry in op_info.values()]
    print(f"{OP_INFO_FILE}: {len(op_info)} ops, white {flags.count('true')}, black {flags.count('false')}, "
          f"gray {flags.count(None)}")
    print(f"{SUPPORTED_FILE}: {len(supported)} TF op types")
    print(f"{MAP_FILE}: {len(op_map['tf_to_ir'])} TF op types mapped, {len(op_map['not_compute'])} not compute, "
          f"{len(op_map['no_op_info'])} without op info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
