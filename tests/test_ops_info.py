"""Tests of the operator library data (ops_info/) and its loader: queries, user folders, merging, errors, cache."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_sim_bridge.errors import OpsInfoError
from npu_sim_bridge.ops_info import (
    BLACK,
    DTYPES_COMPILE_TIME,
    DTYPES_LISTED,
    DTYPES_NO_FLOAT_INPUT,
    GRAY,
    WHITE,
    builtin_library_path,
    clear_cache,
    load_library,
)
from npu_sim_bridge.ops_info import loader

REPO = Path(__file__).resolve().parent.parent
FACTS = REPO.parent / "shared" / "reference" / "ascend910_facts.json"
BUILTIN_FILES = ("aic-ascend910-ops-info.json", "npu_supported_ops.json", "tf_ir_op_map.json")

# Float op types of the ResNet-50, BERT-like and LSTM training graphs (ops_info/tools/coverage.py):
# each must resolve to op info or to a documented section of the map.
TRAINING_GRAPH_FLOAT_OPS = (
    "AddN AddV2 AssignSubVariableOp AssignVariableOp BatchMatMulV2 BiasAdd BiasAddGrad BroadcastTo Cast ConcatV2 "
    "Const Conv2D Conv2DBackpropFilter Conv2DBackpropInput DiagPart DivNoNan Einsum Enter Equal Erf Exit Exp "
    "ExpandDims Fill FusedBatchNormGradV3 FusedBatchNormV3 Greater GreaterEqual Identity If L2Loss Log LogSoftmax "
    "MatMul MaxPool MaxPoolGrad Mean Merge Minimum Mul Neg NextIteration OneHot OptionalFromValue OptionalGetValue "
    "Pack Pad Placeholder Pow Qr RandomUniform ReadVariableOp RealDiv Relu ReluGrad Reshape ResourceApplyAdam "
    "ResourceApplyGradientDescent ResourceApplyMomentum ResourceGather ResourceScatterAdd Rsqrt RsqrtGrad Select "
    "SelectV2 Shape ShapeN Sigmoid SigmoidGrad Sign Slice Softmax SoftmaxCrossEntropyWithLogits "
    "SparseSoftmaxCrossEntropyWithLogits Split Sqrt Square SquaredDifference Squeeze StackPopV2 StackPushV2 "
    "StatelessIf StatelessRandomNormalV2 StatelessRandomUniformV2 StatelessWhile StopGradient StridedSlice "
    "StridedSliceGrad Sub Sum Switch Tanh TanhGrad TensorArrayGatherV3 TensorArrayReadV3 TensorArrayScatterV3 "
    "TensorArrayV3 TensorArrayWriteV3 TensorListFromTensor TensorListGetItem TensorListPopBack TensorListPushBack "
    "TensorListSetItem TensorListStack Tile Transpose UnsortedSegmentSum While ZerosLike"
).split()


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


@pytest.fixture(name="lib")
def _lib():
    return load_library()


def write_json(folder, name, data):
    path = Path(folder) / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


# --- the built-in library ---


def test_builtin_library_loads_from_the_top_level_folder(lib):
    assert lib.path == (REPO / "ops_info").resolve()
    assert builtin_library_path() == REPO / "ops_info"
    assert tuple(file.name for file in lib.files) == BUILTIN_FILES
    assert lib.fallbacks == ()


def test_builtin_counts(lib):
    counts = lib.counts()
    assert (counts["ops"], counts["white"], counts["black"], counts["gray"]) == (831, 47, 95, 689)
    assert counts["supported_tf_types"] == 966
    assert counts["mapped_tf_types"] > 300


@pytest.mark.skipif(not FACTS.is_file(), reason="reference facts file not present")
def test_counts_match_the_facts_file(lib):
    facts = json.loads(FACTS.read_text(encoding="utf-8"))
    ops = facts["aicore_ops_ascend910"]
    assert lib.ir_op_types() == frozenset(ops)
    assert lib.counts()["white"] == sum(1 for entry in ops.values() if entry["precision_reduce"] is True) == 47
    assert lib.counts()["black"] == sum(1 for entry in ops.values() if entry["precision_reduce"] is False) == 95
    for ir_type, entry in ops.items():
        expected = {True: WHITE, False: BLACK, None: GRAY}[entry["precision_reduce"]]
        assert lib.ir_flag(ir_type) == expected, ir_type
    assert lib.supported_tf_types() == frozenset(facts["npu_supported_tf_ops"])


@pytest.mark.parametrize("tf_type", ["Conv2D", "MaxPool", "AvgPool"])
def test_conv_and_pooling_support_float16_only(lib, tf_type):
    info = lib.info(tf_type)
    assert info.float_dtypes == frozenset({"float16"})
    assert info.supports_fp16 and not info.supports_fp32
    assert info.dtype_source == DTYPES_LISTED


def test_matmul_is_matmulv2_white_cube(lib):
    assert lib.ir_types("MatMul") == ("MatMulV2", "MatMul")
    info = lib.info("MatMul")
    assert (info.tf_type, info.ir_type, info.flag) == ("MatMul", "MatMulV2", WHITE)
    assert info.is_cube and info.supports_fp16 and info.supports_fp32
    assert info.dtype_source == DTYPES_COMPILE_TIME  # MatMulV2 lists no dtypes: decided at compile time
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.flag = BLACK


def test_well_known_tf_to_ir_mappings(lib):
    expected = {
        "Softmax": ("SoftmaxV2", GRAY),
        "Sum": ("ReduceSumD", GRAY),  # const-to-attr form first: the documented mixlist name is ReduceSumD
        "Mean": ("ReduceMeanD", BLACK),
        "LogSoftmax": ("LogSoftmaxV2", BLACK),
        "BiasAddGrad": ("BiasAddGrad", BLACK),
        "Conv2DBackpropInput": ("Conv2DBackpropInputD", WHITE),
        "Conv2DBackpropFilter": ("Conv2DBackpropFilterD", WHITE),
        "FusedBatchNormV3": ("BatchNorm", GRAY),
        "FusedBatchNormGradV3": ("BatchNormGrad", GRAY),
        "ResourceApplyMomentum": ("ApplyMomentumD", BLACK),
        "ResourceApplyAdam": ("ApplyAdamD", BLACK),
        "BatchMatMulV2": ("BatchMatMulV2", WHITE),
    }
    for tf_type, (ir_type, flag) in expected.items():
        info = lib.info(tf_type)
        assert (info.ir_type, info.flag) == (ir_type, flag), tf_type
    assert lib.ir_types("Sum") == ("ReduceSumD", "ReduceSum")
    assert lib.info("Conv2DBackpropInput").float_dtypes == frozenset({"float16"})
    assert lib.info("Conv2DBackpropFilter").is_cube and not lib.info("Relu").is_cube


def test_tf_and_ir_names_both_resolve(lib):
    assert lib.resolve("MatMul") == "MatMul"
    assert lib.resolve("MatMulV2") == "MatMul"
    assert lib.resolve("SoftmaxV2") == "Softmax"
    assert lib.resolve("ReduceSumD") == "Sum"
    assert lib.resolve("ReduceSum") == "Sum"
    assert lib.resolve("ReduceMean") == "Mean"
    assert lib.resolve("Conv2D") == "Conv2D"
    assert lib.resolve_all("BatchNorm") == ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
    assert lib.resolve_all("ApplyAdamD") == ("ApplyAdam", "ResourceApplyAdam")
    assert lib.resolve("Matmul") is None  # case-sensitive: the seed's "Matmul" is not an op type
    assert lib.resolve("NoSuchOp") is None
    names = lib.known_names()
    assert {"MatMul", "MatMulV2", "ReduceSumD", "Sum", "Placeholder"} <= names
    assert "Matmul" not in names


def test_status_sections(lib):
    assert lib.status("MatMul") == "op_info"
    assert lib.status("Const") == "not_compute" and lib.not_compute_kind("Const") == "source"
    assert lib.not_compute_kind("Enter") is None and lib.info("Enter").flag == BLACK  # Enter is in the library
    assert lib.not_compute_kind("Exit") == "control_flow"
    assert lib.status("Einsum") == "no_op_info" and "EinSum" in lib.no_op_info_note("Einsum")
    assert lib.ir_types("Einsum") == ("EinSum",) and lib.info("Einsum") is None
    assert lib.status("NoSuchOp") == "unknown"


def test_training_graph_float_ops_all_resolve(lib):
    unresolved = [op for op in TRAINING_GRAPH_FLOAT_OPS if lib.status(op) == "unknown"]
    assert unresolved == []


def test_device_supported(lib):
    assert lib.device_supported("MatMul")
    assert lib.device_supported("Placeholder")
    assert not lib.device_supported("NoSuchOp")
    assert not lib.is_heavy("MatMul")


# --- user folders ---


def test_user_folder_with_one_op_info_file_uses_builtin_supported_list_and_map(tmp_path):
    write_json(tmp_path, "my-ops-info.json", {
        "MatMulV2": {"precision_reduce": {"flag": "false"},
                     "input0": {"name": "x1", "dtype": "float16,float,int32"}},
        "Relu": {"input0": {"name": "x", "dtype": "float16"}},
    })
    lib = load_library(tmp_path)
    assert lib.path == tmp_path.resolve()
    assert lib.fallbacks == ("npu_supported_ops.json", "tf_ir_op_map.json")
    assert [file.name for file in lib.files] == ["my-ops-info.json", *BUILTIN_FILES[1:]]
    info = lib.info("MatMul")  # through the built-in map: MatMul -> MatMulV2
    assert (info.ir_type, info.flag) == ("MatMulV2", BLACK)
    assert info.float_dtypes == frozenset({"float16", "float32"})  # "float" is float32 in real CANN files
    assert lib.info("Relu").float_dtypes == frozenset({"float16"})
    assert lib.info("Conv2D") is None  # not in this library
    assert lib.device_supported("MatMul")  # built-in supported list
    assert lib.counts()["ops"] == 2 and lib.counts()["supported_tf_types"] == 966


def test_user_folder_own_supported_list_and_map_win(tmp_path):
    write_json(tmp_path, "ops.json", {"MyIrOp": {"precision_reduce": {"flag": "true"}}})
    write_json(tmp_path, "npu_supported_ops.json", {"MyTfOp": {"isGray": True, "isHeavy": True}})
    write_json(tmp_path, "tf_ir_op_map.json", {"_about": "comment", "tf_to_ir": {"MyTfOp": ["MyIrOp"]}})
    lib = load_library(tmp_path)
    assert lib.fallbacks == ()
    assert lib.info("MyTfOp").ir_type == "MyIrOp" and lib.info("MyTfOp").flag == WHITE
    assert lib.resolve("MyIrOp") == "MyTfOp"
    assert lib.device_supported("MyTfOp") and not lib.device_supported("MyTfOp", mix_compile=True)
    assert lib.is_heavy("MyTfOp")
    assert not lib.device_supported("MatMul")
    assert lib.info("MyIrOp").tf_type == "MyIrOp"  # an IR op type with no TF mapping stands for itself


def test_every_json_file_is_loaded_and_later_files_override(tmp_path):
    write_json(tmp_path, "b-extra.json", {"Relu": {"precision_reduce": {"flag": "true"}}, "Tanh": {}})
    write_json(tmp_path, "a-base.json", {"Relu": {"input0": {"dtype": "float16,float32"}}, "Exp": {}})
    (tmp_path / "notes.txt").write_text("not json", encoding="utf-8")
    lib = load_library(tmp_path)
    assert [file.name for file in lib.files][:2] == ["a-base.json", "b-extra.json"]
    assert lib.ir_op_types() == frozenset({"Relu", "Tanh", "Exp"})
    assert lib.info("Relu").flag == WHITE  # b-extra.json replaces a-base.json's entry
    assert lib.info("Relu").dtype_source == DTYPES_COMPILE_TIME  # the later entry lists no dtype
    assert lib.info("Exp").flag == GRAY


def test_float_dtypes_come_from_the_first_input_that_lists_a_float(tmp_path):
    write_json(tmp_path, "ops.json", {
        "IndexFirst": {"input0": {"dtype": "int32"}, "input1": {"dtype": "float16"}},
        "NoFloat": {"input0": {"dtype": "bool"}},
        "Undecided": {"input0": {"name": "x"}, "input1": {"dtype": "float16"}},
        "Bf16": {"input0": {"dtype": "bfloat16,float16,float32"}},
    })
    lib = load_library(tmp_path)
    assert lib.info("IndexFirst").float_dtypes == frozenset({"float16"})
    assert lib.info("NoFloat").dtype_source == DTYPES_NO_FLOAT_INPUT
    assert lib.info("NoFloat").float_dtypes == frozenset({"float16", "float32"})
    assert lib.info("Undecided").dtype_source == DTYPES_COMPILE_TIME
    assert lib.info("Bf16").supports_bf16


# --- errors ---


def test_missing_folder(tmp_path):
    with pytest.raises(OpsInfoError, match=r"operator library folder .*nope does not exist"):
        load_library(tmp_path / "nope")


def test_path_that_is_a_file(tmp_path):
    path = write_json(tmp_path, "ops.json", {})
    with pytest.raises(OpsInfoError, match="is not a directory"):
        load_library(path)


def test_folder_without_json_files(tmp_path):
    (tmp_path / "readme.txt").write_text("x", encoding="utf-8")
    with pytest.raises(OpsInfoError, match="contains no .json files"):
        load_library(tmp_path)


def test_folder_with_only_the_supported_list(tmp_path):
    write_json(tmp_path, "npu_supported_ops.json", {})
    with pytest.raises(OpsInfoError, match="contains no op-info .json file"):
        load_library(tmp_path)


def test_invalid_json_names_file_line_and_column(tmp_path):
    (tmp_path / "broken.json").write_text('{\n  "Relu": {\n    "input0": {"dtype": "float16",}\n  }\n}\n',
                                          encoding="utf-8")
    with pytest.raises(OpsInfoError) as caught:
        load_library(tmp_path)
    message = str(caught.value)
    assert "broken.json" in message and "invalid JSON at line 3, column 35" in message


def test_invalid_json_in_a_user_map_file(tmp_path):
    write_json(tmp_path, "ops.json", {"Relu": {}})
    (tmp_path / "tf_ir_op_map.json").write_text('{"tf_to_ir": [}', encoding="utf-8")
    with pytest.raises(OpsInfoError, match=r"tf_ir_op_map.json: invalid JSON at line 1, column 15"):
        load_library(tmp_path)


@pytest.mark.parametrize("content, expected", [
    ([], r"ops.json: the top level must be a JSON object mapping op types to op info, got an array"),
    ({"Relu": ["x"]}, r"ops.json: op 'Relu': the op info must be a JSON object, got an array"),
    ({"Relu": {"precision_reduce": {"flag": "maybe"}}},
     r"ops.json: op 'Relu': precision_reduce.flag must be \"true\" or \"false\", got \"maybe\""),
    ({"Relu": {"precision_reduce": "true"}}, r"ops.json: op 'Relu': precision_reduce must be an object"),
    ({"Relu": {"input0": {"dtype": ["float16"]}}}, r"ops.json: op 'Relu': input0.dtype must be a comma-separated"),
    ({"Relu": {"output0": "y"}}, r"ops.json: op 'Relu': output0 must be a JSON object, got a string"),
])
def test_wrong_op_info_structure_names_file_and_op(tmp_path, content, expected):
    write_json(tmp_path, "ops.json", content)
    with pytest.raises(OpsInfoError, match=expected):
        load_library(tmp_path)


@pytest.mark.parametrize("name, content, expected", [
    ("npu_supported_ops.json", {"MatMul": {"isGray": "no"}},
     r"npu_supported_ops.json: op 'MatMul': isGray must be true or false, got \"no\""),
    ("npu_supported_ops.json", ["MatMul"], r"npu_supported_ops.json: the top level must be a JSON object"),
    ("tf_ir_op_map.json", {"tf_to_irr": {}}, r"tf_ir_op_map.json: unknown section\(s\) tf_to_irr"),
    ("tf_ir_op_map.json", {"tf_to_ir": {"MatMul": "MatMulV2"}},
     r"tf_ir_op_map.json: op 'MatMul': tf_to_ir entries must be non-empty arrays"),
    ("tf_ir_op_map.json", {"not_compute": {"Const": "constant"}},
     r"tf_ir_op_map.json: op 'Const': not_compute kind must be one of"),
])
def test_wrong_structure_of_supported_list_and_map(tmp_path, name, content, expected):
    write_json(tmp_path, "ops.json", {"Relu": {}})
    write_json(tmp_path, name, content)
    with pytest.raises(OpsInfoError, match=expected):
        load_library(tmp_path)


# --- cache and lookup of the built-in folder ---


def test_cache_returns_the_same_library_until_a_file_changes(tmp_path):
    path = write_json(tmp_path, "ops.json", {"Relu": {}})
    first = load_library(tmp_path)
    assert load_library(str(tmp_path)) is first
    write_json(tmp_path, "ops.json", {"Relu": {"precision_reduce": {"flag": "false"}}})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = load_library(tmp_path)
    assert second is not first and second.info("Relu").flag == BLACK
    write_json(tmp_path, "more.json", {"Tanh": {}})
    assert load_library(tmp_path).info("Tanh") is not None


def test_installed_copy_of_the_data_is_preferred(tmp_path, monkeypatch):
    package = tmp_path / "site-packages" / "npu_sim_bridge"
    (package / "ops_info").mkdir(parents=True)
    monkeypatch.setattr(loader, "__file__", str(package / "ops_info" / "loader.py"))
    with pytest.raises(OpsInfoError, match="the built-in operator library is missing"):
        builtin_library_path()
    (package / "_ops_info_data").mkdir()
    assert builtin_library_path() == package / "_ops_info_data"


@pytest.mark.skipif(not FACTS.is_file(), reason="reference facts file not present")
def test_generated_files_are_reproducible(tmp_path):
    script = REPO / "ops_info" / "tools" / "build_ops_info.py"
    result = subprocess.run([sys.executable, str(script), str(FACTS), "--out", str(tmp_path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    for name in BUILTIN_FILES:
        assert (tmp_path / name).read_text(encoding="utf-8") == (REPO / "ops_info" / name).read_text(
            encoding="utf-8"), name
