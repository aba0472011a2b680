"""Tests of the parameter_map registry and option parsing: types, values, combinations, environment."""

import json
import os
import re
import warnings

import pytest
import tensorflow as tf
from tensorflow.core.framework.attr_value_pb2 import AttrValue

from npu_sim_bridge.config import (
    KEYS,
    Key,
    NpuSimConfigWarning,
    Options,
    effective_precision_mode,
    from_any,
    from_config_proto,
    from_dict,
    is_mix_precision,
    parse_dump_steps,
    parse_parameter_map,
    parse_pass_list,
)
from npu_sim_bridge.errors import ConfigError

NO_ENV = {}

ALL_PRECISION_MODES = ("force_fp32, force_fp16, allow_fp32_to_fp16, must_keep_origin_dtype, allow_mix_precision, "
                       "allow_mix_precision_fp16, allow_mix_precision_bf16, allow_fp32_to_bf16, cube_fp16in_fp32out")


def user_config(**params):
    """A ConfigProto built the way migrated scripts build it."""
    cfg = tf.compat.v1.ConfigProto()
    custom_op = cfg.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    for name, value in params.items():
        attr = custom_op.parameter_map[name]
        if isinstance(value, bool):
            attr.b = value
        elif isinstance(value, int):
            attr.i = value
        else:
            attr.s = tf.compat.as_bytes(value)
    return cfg


def attr(**field):
    return AttrValue(**field)


def parse(**values):
    return from_dict(values, environ=NO_ENV)


# --- the registry -------------------------------------------------------------------------------------


def test_registry_lists_the_keys_migrated_scripts_use_with_the_real_fields():
    expected = {
        "precision_mode": "s", "precision_mode_v2": "s", "modify_mixlist": "s", "mix_compile_mode": "b",
        "iterations_per_loop": "i", "fusion_switch_file": "s", "enable_dump": "b", "dump_path": "s",
        "dump_step": "s", "dump_mode": "s", "enable_dump_debug": "b", "dump_debug_mode": "s",
        "use_off_line": "b", "enable_data_pre_proc": "b", "hcom_parallel": "b", "graph_run_mode": "i",
        "op_debug_level": "i", "debug_dir": "s", "variable_format_optimize": "b", "op_select_implmode": "s",
        "enable_exception_dump": "i", "session_device_id": "i", "min_group_size": "b",
    }
    assert {name: KEYS[name].kind for name in expected} == expected


def test_only_the_documented_keys_act_in_the_simulation():
    acting = {name for name, key in KEYS.items() if key.acts}
    assert acting == {
        "precision_mode", "precision_mode_v2", "modify_mixlist", "mix_compile_mode", "iterations_per_loop",
        "fusion_switch_file", "customize_dtypes", "enable_dump", "dump_path", "dump_step", "dump_mode",
        "enable_dump_debug", "dump_debug_mode", "profiling_mode", "profiling_options", "sim_fp16_execution",
        "sim_fp16_rounding", "sim_geop_call",
        "sim_report_dir", "sim_ops_info_path", "sim_passes",
    }


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_default_has_the_key_type_and_passes_its_own_checks(name):
    key = KEYS[name]
    python_type = {"s": str, "b": bool, "i": int}[key.kind]
    if key.default is None:
        assert key.kind == "i"
        return
    assert type(key.default) is python_type
    if key.allowed is not None and key.default != "":
        assert key.default in key.allowed
    if key.validate is not None and key.default != "":
        assert key.validate(key.default) is None


def test_key_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        Key("x", "f", 0.0)


def test_defaults_when_nothing_is_set():
    options = parse()
    assert options["precision_mode"] == "allow_fp32_to_fp16"
    assert options["mix_compile_mode"] is False
    assert options["iterations_per_loop"] == 1
    assert options["dump_mode"] == "output"
    assert options["sim_fp16_execution"] == "emulate"
    assert options["sim_passes"] == "all"
    assert options.explicit == frozenset()
    assert options.describe() == []


# --- field types ---------------------------------------------------------------------------------------

_WRONG_FIELD = {"s": ("b", True), "b": ("i", 1), "i": ("s", b"1")}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_every_key_rejects_the_wrong_attr_value_field(name):
    key = KEYS[name]
    field, value = _WRONG_FIELD[key.kind]
    expected_field = {"s": ".s (a string)", "b": ".b (a bool)", "i": ".i (an int)"}[key.kind]
    with pytest.raises(ConfigError) as error:
        parse_parameter_map({name: attr(**{field: value})}, environ=NO_ENV)
    assert str(error.value) == f"option {name} must be set with {expected_field}, got .{field}"


def test_precision_mode_set_with_b_gives_the_documented_message():
    with pytest.raises(ConfigError, match=r"^option precision_mode must be set with \.s \(a string\), got \.b$"):
        parse_parameter_map({"precision_mode": attr(b=True)}, environ=NO_ENV)


def test_attr_value_with_no_field_is_an_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"option mix_compile_mode must be set with \.b \(a bool\), got nothing"):
        parse_parameter_map({"mix_compile_mode": attr()}, environ=NO_ENV)


def test_false_and_zero_set_explicitly_count_as_set():
    cfg = user_config(mix_compile_mode=False, iterations_per_loop=0)
    with pytest.raises(ConfigError, match="iterations_per_loop value 0 is invalid, it should be >= 1"):
        from_config_proto(cfg, environ=NO_ENV)


def test_invalid_utf8_in_s_is_an_error():
    with pytest.raises(ConfigError, match="dump_path .* not valid UTF-8"):
        parse_parameter_map({"dump_path": attr(s=b"\xff\xfe")}, environ=NO_ENV)


@pytest.mark.parametrize("name, value, expected", [
    ("mix_compile_mode", "true", True), ("mix_compile_mode", "False", False), ("mix_compile_mode", "1", True),
    ("mix_compile_mode", "0", False), ("mix_compile_mode", b"true", True), ("mix_compile_mode", 1, True),
    ("iterations_per_loop", "10", 10), ("iterations_per_loop", 10, 10), ("stream_sync_timeout", "-1", -1),
    ("precision_mode", b"force_fp16", "force_fp16"), ("modify_mixlist", None, ""),
])
def test_from_dict_converts_cli_text_and_python_values(name, value, expected):
    assert parse(**{name: value})[name] == expected


@pytest.mark.parametrize("name, value, got", [
    ("iterations_per_loop", True, "bool True"),
    ("iterations_per_loop", "ten", "str 'ten'"),
    ("iterations_per_loop", 1.0, "float 1.0"),
    ("mix_compile_mode", "yes", "str 'yes'"),
    ("mix_compile_mode", 2, "int 2"),
    ("precision_mode", 3, "int 3"),
    ("precision_mode", True, "bool True"),
])
def test_from_dict_rejects_values_of_the_wrong_type(name, value, got):
    with pytest.raises(ConfigError) as error:
        parse(**{name: value})
    message = str(error.value)
    assert message.startswith(f"option {name} must be ")
    assert message.endswith(f"got {got}")


def test_from_dict_accepts_attr_values_too():
    assert parse(precision_mode=attr(s=b"force_fp32"))["precision_mode"] == "force_fp32"


# --- values ---------------------------------------------------------------------------------------------


def test_enumeration_message_names_key_value_and_allowed_values_in_order():
    with pytest.raises(ConfigError) as error:
        parse(precision_mode="fp17")
    expected = f"option precision_mode value 'fp17' is invalid, it should be one of: {ALL_PRECISION_MODES}"
    assert str(error.value) == expected


def test_int_enumeration_message():
    with pytest.raises(ConfigError) as error:
        parse(graph_run_mode=2)
    assert str(error.value) == "option graph_run_mode value 2 is invalid, it should be one of: 0, 1"


@pytest.mark.parametrize("params, fragment", [
    ({"precision_mode_v2": "fp32"}, "option precision_mode_v2 value 'fp32' is invalid, it should be one of: "
                                    "fp16, origin, mixed_float16, mixed_bfloat16, cube_fp16in_fp32out"),
    ({"precision_mode_v2": "mixed_hif8"}, "HiFloat8"),
    ({"iterations_per_loop": 0}, "option iterations_per_loop value 0 is invalid, it should be >= 1"),
    ({"local_rank_id": 8}, "local_rank_id value 8 is invalid, it should be between 0 and 7"),
    ({"session_device_id": -2}, "session_device_id value -2 is invalid"),
    ({"graph_max_parallel_model_num": 0}, "graph_max_parallel_model_num value 0 is invalid"),
    ({"enable_exception_dump": 3}, "it should be one of: 0, 1, 2"),
    ({"variable_use_1g_huge_page": 5}, "variable_use_1g_huge_page value 5"),
    ({"export_compile_stat": 3}, "export_compile_stat value 3"),
    ({"jit_compile": "yes"}, "it should be one of: true, false, auto"),
    ({"shape_generalization_mode": "strict"}, "it should be one of: STRICT, FULL, ADAPTIVE"),
    ({"buffer_optimize": "on"}, "it should be one of: l2_optimize, off_optimize"),
    ({"dump_data": "all"}, "it should be one of: tensor, stats"),
    ({"op_select_implmode": "fast"}, "op_select_implmode value 'fast' is invalid"),
    ({"graph_slice": "yes"}, "it should be one of: auto, manual"),
    ({"local_device_list": "0;1"}, "local_device_list value '0;1' is invalid"),
    ({"sim_fp16_execution": "fast"}, "it should be one of: emulate, native"),
    ({"sim_passes": "precision,Fusion"}, "item 2 ('Fusion') is not a pass name"),
    ({"sim_passes": "all,precision"}, "cannot be combined"),
    ({"sim_passes": ""}, "item 1 ('') is not a pass name"),
])
def test_values_the_real_adapter_rejects_are_errors(params, fragment):
    with pytest.raises(ConfigError) as error:
        parse(**params)
    assert fragment in str(error.value)


@pytest.mark.parametrize("params", [
    {"precision_mode_v2": "mixed_bfloat16"},
    {"precision_mode": "cube_fp16in_fp32out"},
    {"local_rank_id": 7, "local_device_list": "0,1,2"},
    {"sim_passes": "precision, fusion"},
    {"sim_passes": "none"},
    {"input_shape": "data:1,-1,-1,3;label:1", "dynamic_dims": "224,224;448,448", "dynamic_node_type": 1},
    {"aoe_mode": ""},
])
def test_valid_values_are_accepted(params):
    options = parse(**params)
    assert {name: options[name] for name in params} == params


def test_parse_pass_list():
    assert parse_pass_list("all") is None
    assert parse_pass_list("none") == ()
    assert parse_pass_list("precision, partition") == ("precision", "partition")
    with pytest.raises(ConfigError, match="sim_passes"):
        parse_pass_list("Precision")


# --- unknown keys ----------------------------------------------------------------------------------------


def test_unknown_key_is_a_warning_naming_the_closest_key():
    expected = "unknown option 'precison_mode' is ignored; did you mean precision_mode?"
    with pytest.warns(NpuSimConfigWarning, match=re.escape(expected)):
        options = from_config_proto(user_config(precison_mode="allow_mix_precision"), environ=NO_ENV)
    assert options.warnings == [expected]
    assert options.unknown == ("precison_mode",)
    assert options["precision_mode"] == "allow_fp32_to_fp16"
    assert "precison_mode" not in options.explicit


def test_unknown_key_in_other_case_suggests_the_real_spelling():
    with pytest.warns(NpuSimConfigWarning, match="did you mean HCCL_algorithm"):
        parse(hccl_algorithm="ring")


def test_unknown_key_far_from_any_known_key_still_warns():
    with pytest.warns(NpuSimConfigWarning, match="unknown option 'zzzz' is ignored; it is not a key"):
        parse(zzzz=1)


def test_unknown_key_with_a_wrong_field_is_only_a_warning():
    with pytest.warns(NpuSimConfigWarning):
        parse_parameter_map({"not_a_key": attr()}, environ=NO_ENV)


# --- combinations ------------------------------------------------------------------------------------------


def test_precision_mode_together_with_precision_mode_v2_is_an_error():
    with pytest.raises(ConfigError, match="'precision_mode' and 'precision_mode_v2' can not be assigned at the same "
                                          "time.*keep only one of them"):
        parse(precision_mode="allow_mix_precision", precision_mode_v2="mixed_float16")


@pytest.mark.parametrize("params, fragment", [
    ({}, "no precision mode is, so the default 'allow_fp32_to_fp16' applies"),
    ({"precision_mode": "force_fp16"}, "precision_mode is 'force_fp16'"),
    ({"precision_mode": "allow_fp32_to_bf16"}, "precision_mode is 'allow_fp32_to_bf16'"),
    ({"precision_mode_v2": "fp16"}, "precision_mode_v2 is 'fp16'"),
])
def test_modify_mixlist_needs_a_mix_precision_mode(params, fragment):
    with pytest.raises(ConfigError) as error:
        parse(modify_mixlist="/tmp/ops_info.json", **params)
    message = str(error.value)
    assert message.startswith("modify_mixlist is set, but ")
    assert fragment in message
    assert "or remove modify_mixlist" in message


@pytest.mark.parametrize("params", [
    {"precision_mode": "allow_mix_precision"},
    {"precision_mode": "allow_mix_precision_fp16"},
    {"precision_mode": "allow_mix_precision_bf16"},
    {"precision_mode_v2": "mixed_float16"},
    {"precision_mode_v2": "mixed_bfloat16"},
])
def test_modify_mixlist_is_accepted_with_a_mix_precision_mode(params):
    options = parse(modify_mixlist="/tmp/ops_info.json", **params)
    assert options["modify_mixlist"] == "/tmp/ops_info.json"


def test_mix_compile_mode_with_iterations_per_loop_other_than_1_is_an_error():
    with pytest.raises(ConfigError) as error:
        from_config_proto(user_config(mix_compile_mode=True, iterations_per_loop=10), environ=NO_ENV)
    assert '"iterations_per_loop" must be 1 with "mix_compile_mode" is True' in str(error.value)
    assert "got iterations_per_loop=10" in str(error.value)


def test_mix_compile_mode_with_one_iteration_and_many_iterations_without_it_are_fine():
    assert parse(mix_compile_mode=True, iterations_per_loop=1)["mix_compile_mode"] is True
    assert parse(mix_compile_mode=False, iterations_per_loop=100)["iterations_per_loop"] == 100


@pytest.mark.parametrize("flag", ["enable_dump", "enable_dump_debug"])
def test_dump_without_dump_path_is_an_error(flag):
    with pytest.raises(ConfigError, match=f"{flag} is true but dump_path is not set"):
        parse(**{flag: True})


@pytest.mark.parametrize("flag", ["enable_dump", "enable_dump_debug"])
def test_dump_path_that_does_not_exist_is_an_error(flag, tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match="dump_path .*missing' does not exist; create the directory"):
        parse(**{flag: True, "dump_path": missing})


def test_dump_path_that_is_a_file_is_an_error(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        parse(enable_dump=True, dump_path=str(a_file))


def test_dump_path_that_is_not_writable_is_an_error(tmp_path, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if path == str(tmp_path) else real_access(path, mode))
    with pytest.raises(ConfigError, match="is not readable and writable"):
        parse(enable_dump_debug=True, dump_path=str(tmp_path))


def test_dump_path_is_not_checked_while_dumps_are_off(tmp_path):
    assert parse(dump_path=str(tmp_path / "missing"))["enable_dump"] is False


def test_valid_dump_configuration(tmp_path):
    options = parse(enable_dump=True, dump_path=str(tmp_path), dump_step="0|5|10-20", dump_mode="all")
    assert parse_dump_steps(options["dump_step"]) == [(0, 0), (5, 5), (10, 20)]


@pytest.mark.parametrize("dump_step, fragment", [
    ("0|x", "item 2 ('x') is not N or N-M"),
    ("0|5|10-", "item 3 ('10-') is not N or N-M"),
    ("1-2-3", "item 1 ('1-2-3') is not N or N-M"),
    ("-1", "item 1 ('-1') is not N or N-M"),
    ("0||5", "item 2 ('') is not N or N-M"),
    ("0|20-10", "item 2 ('20-10') is a range whose first step is not below its last step"),
    ("5-5", "item 1 ('5-5') is a range"),
    ("|".join(str(step) for step in range(101)), "it has 101 items; at most 100 are allowed"),
])
def test_malformed_dump_step_is_an_error_naming_the_item(dump_step, fragment, tmp_path):
    with pytest.raises(ConfigError) as error:
        parse(enable_dump=True, dump_path=str(tmp_path), dump_step=dump_step)
    assert str(error.value).startswith(f"option dump_step value {dump_step!r} is invalid, ")
    assert fragment in str(error.value)


def test_one_hundred_dump_steps_are_allowed(tmp_path):
    steps = "|".join(str(step) for step in range(100))
    assert len(parse_dump_steps(parse(enable_dump=True, dump_path=str(tmp_path), dump_step=steps)["dump_step"])) == 100


def test_parse_dump_steps():
    assert parse_dump_steps("") == []
    assert parse_dump_steps("3") == [(3, 3)]
    assert parse_dump_steps("0|2-4") == [(0, 0), (2, 4)]
    with pytest.raises(ConfigError, match="item 1"):
        parse_dump_steps("a")


def test_dump_mode_outside_input_output_all_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as error:
        parse(enable_dump=True, dump_path=str(tmp_path), dump_mode="both")
    assert str(error.value) == "option dump_mode value 'both' is invalid, it should be one of: input, output, all"


def test_dump_debug_mode_outside_its_values_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="it should be one of: aicore_overflow, atomic_overflow, all"):
        parse(enable_dump_debug=True, dump_path=str(tmp_path), dump_debug_mode="overflow")


def test_dump_values_are_only_warned_about_while_dumps_are_off():
    # The real adapter checks dump_step/dump_mode only with enable_dump on; scripts that run there must run here.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = parse(dump_mode="both", dump_step="x")
    assert [warning.category for warning in caught] == [NpuSimConfigWarning, NpuSimConfigWarning]
    assert options.warnings == [str(warning.message) for warning in caught]
    assert options.warnings[0].startswith("option dump_step value 'x' is invalid, item 1 ('x')")
    assert options.warnings[1].startswith("option dump_mode value 'both' is invalid")
    assert all(text.endswith("ignored while enable_dump is off, but fix it before turning enable_dump on")
               for text in options.warnings)


@pytest.mark.parametrize("params, fragment", [
    ({"optypelist_for_implmode": "Pooling"}, "optypelist_for_implmode is set without op_select_implmode"),
    ({"input_shape": "data:1,-1"}, "must be set together; input_shape set but dynamic_dims, dynamic_node_type not"),
    ({"input_shape": "data:1,-1", "dynamic_dims": "1;2", "dynamic_node_type": 0, "compile_hybrid_mode": 1},
     "dynamic_node_type must be 1"),
    ({"compile_hybrid_mode": 1}, "compile_hybrid_mode is 1, which needs input_shape"),
    ({"enable_compress_weight": True, "compress_weight_conf": "/tmp/c.cfg"},
     "enable_compress_weight can not be used with compress_weight_conf"),
    ({"dynamic_input": True, "dynamic_graph_execute_mode": "eager"},
     "it should be one of: lazy_recompile, dynamic_execute"),
    ({"aoe_mode": "3"}, "aoe_mode value '3' is invalid, it should be one of: 1, 2, 4"),
    ({"aoe_mode": "1", "work_path": "/nonexistent/npu_sim_work"}, "aoe_mode is '1' but work_path"),
])
def test_other_combinations_the_real_adapter_rejects(params, fragment):
    with pytest.raises(ConfigError) as error:
        parse(**params)
    assert fragment in str(error.value)


def test_input_fusion_size_outside_range_is_clamped_with_a_warning():
    with pytest.warns(NpuSimConfigWarning, match="would use 33554432"):
        options = parse(input_fusion_size=64 * 1024 * 1024)
    assert options["input_fusion_size"] == 64 * 1024 * 1024


# --- environment -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("variable, name, value", [
    ("NPU_SIM_FP16_EXECUTION", "sim_fp16_execution", "native"),
    ("NPU_SIM_REPORT_DIR", "sim_report_dir", "/tmp/reports"),
    ("NPU_SIM_OPS_INFO_PATH", "sim_ops_info_path", "/opt/ops_info"),
    ("NPU_SIM_PASSES", "sim_passes", "precision"),
])
def test_sim_keys_come_from_the_environment(variable, name, value):
    options = from_dict({}, environ={variable: value})
    assert options[name] == value
    assert options.from_environment == {name}
    assert options.explicit == frozenset()
    assert options.source(name) == "environment"
    assert options.describe() == [{"name": name, "value": value, "acts": True, "note": "used by the simulation",
                                   "source": f"environment variable {variable}"}]


def test_explicit_value_beats_the_environment():
    options = from_config_proto(user_config(sim_fp16_execution="emulate"),
                                environ={"NPU_SIM_FP16_EXECUTION": "native"})
    assert options["sim_fp16_execution"] == "emulate"
    assert options.source("sim_fp16_execution") == "explicit"


def test_environment_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("NPU_SIM_FP16_EXECUTION", "native")
    assert from_dict({})["sim_fp16_execution"] == "native"


def test_empty_environment_variable_is_unset():
    assert from_dict({}, environ={"NPU_SIM_FP16_EXECUTION": ""})["sim_fp16_execution"] == "emulate"


def test_invalid_environment_value_names_the_variable():
    with pytest.raises(ConfigError, match="^environment variable NPU_SIM_FP16_EXECUTION: option sim_fp16_execution "
                                          "value 'fast' is invalid"):
        from_dict({}, environ={"NPU_SIM_FP16_EXECUTION": "fast"})


def test_only_sim_keys_come_from_the_environment():
    assert from_dict({}, environ={"NPU_SIM_PRECISION_MODE": "force_fp16"})["precision_mode"] == "allow_fp32_to_fp16"


# --- ConfigProto and other inputs -----------------------------------------------------------------------------


def test_from_config_proto_reads_a_config_built_like_a_user_would():
    cfg = tf.compat.v1.ConfigProto()
    custom_op = cfg.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
    custom_op.parameter_map["mix_compile_mode"].b = True
    custom_op.parameter_map["use_off_line"].b = True
    options = from_config_proto(cfg, environ=NO_ENV)
    assert options["precision_mode"] == "allow_mix_precision"
    assert options["mix_compile_mode"] is True
    assert options.explicit == {"precision_mode", "mix_compile_mode", "use_off_line"}
    assert effective_precision_mode(options) == "allow_mix_precision"


def test_from_config_proto_without_npu_optimizer_is_none():
    cfg = tf.compat.v1.ConfigProto()
    other = cfg.graph_options.rewrite_options.custom_optimizers.add()
    other.name = "SomethingElse"
    assert from_config_proto(cfg, environ=NO_ENV) is None
    assert from_any(cfg, environ=NO_ENV)["precision_mode"] == "allow_fp32_to_fp16"


def test_several_npu_optimizers_are_merged_later_winning_with_a_warning():
    cfg = user_config(precision_mode="allow_mix_precision", mix_compile_mode=True)
    second = cfg.graph_options.rewrite_options.custom_optimizers.add()
    second.name = "NpuOptimizer"
    second.parameter_map["precision_mode"].s = b"force_fp32"
    with pytest.warns(NpuSimConfigWarning, match="2 custom optimizers named NpuOptimizer"):
        options = from_config_proto(cfg, environ=NO_ENV)
    assert options["precision_mode"] == "force_fp32"
    assert options["mix_compile_mode"] is True


def test_from_config_proto_rejects_other_objects():
    with pytest.raises(TypeError, match="ConfigProto"):
        from_config_proto({"precision_mode": "force_fp16"})


def test_from_any_accepts_every_supported_input():
    cfg = user_config(precision_mode="force_fp16")
    custom_op = cfg.graph_options.rewrite_options.custom_optimizers[0]
    run_config = tf.estimator.RunConfig(session_config=cfg)
    for source in (cfg, cfg.graph_options.rewrite_options, custom_op, {"precision_mode": "force_fp16"}, run_config):
        assert from_any(source, environ=NO_ENV)["precision_mode"] == "force_fp16"
    options = from_any(cfg, environ=NO_ENV)
    assert from_any(options) is options
    assert from_any(None, environ=NO_ENV).explicit == frozenset()
    with pytest.raises(TypeError, match="got int"):
        from_any(42)


# --- Options ----------------------------------------------------------------------------------------------


def test_options_are_immutable():
    options = parse(precision_mode="force_fp16")
    with pytest.raises(AttributeError):
        options.precision_mode = "force_fp32"
    with pytest.raises(TypeError):
        options["precision_mode"] = "force_fp32"
    with pytest.raises(AttributeError):
        options.warnings = []


def test_get_and_getitem():
    options = parse(precision_mode="force_fp16")
    assert options.get("precision_mode") == "force_fp16"
    assert options.get("dump_path") == ""
    assert options.get("no_such_key", "fallback") == "fallback"
    with pytest.raises(KeyError, match="did you mean precision_mode"):
        options["precison_mode"]


def test_to_dict_has_every_key_and_is_json_friendly():
    values = parse(precision_mode="force_fp16", iterations_per_loop=5).to_dict()
    assert set(values) == set(KEYS)
    assert values["precision_mode"] == "force_fp16"
    assert values["iterations_per_loop"] == 5
    assert json.loads(json.dumps(values)) == values


def test_describe_marks_keys_without_effect():
    options = from_config_proto(user_config(precision_mode="allow_mix_precision", hcom_parallel=True,
                                            graph_memory_max_size="1024"), environ=NO_ENV)
    assert options.describe() == [
        {"name": "precision_mode", "value": "allow_mix_precision", "acts": True, "note": "used by the simulation",
         "source": "explicit"},
        {"name": "hcom_parallel", "value": True, "acts": False, "note": "accepted, no effect in simulation",
         "source": "explicit"},
        {"name": "graph_memory_max_size", "value": "1024", "acts": False, "note": "accepted, no effect in simulation",
         "source": "explicit"},
    ]


def test_a_valid_config_raises_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        options = from_config_proto(user_config(precision_mode="allow_mix_precision"), environ=NO_ENV)
    assert options.warnings == []


# --- precision modes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("params, expected", [
    ({}, "allow_fp32_to_fp16"),
    ({"precision_mode": "allow_mix_precision_fp16"}, "allow_mix_precision"),
    ({"precision_mode": "allow_mix_precision"}, "allow_mix_precision"),
    ({"precision_mode": "allow_mix_precision_bf16"}, "allow_mix_precision_bf16"),
    ({"precision_mode": "force_fp32"}, "force_fp32"),
    ({"precision_mode_v2": "fp16"}, "force_fp16"),
    ({"precision_mode_v2": "origin"}, "must_keep_origin_dtype"),
    ({"precision_mode_v2": "mixed_float16"}, "allow_mix_precision"),
    ({"precision_mode_v2": "mixed_bfloat16"}, "allow_mix_precision_bf16"),
    ({"precision_mode_v2": "cube_fp16in_fp32out"}, "cube_fp16in_fp32out"),
])
def test_effective_precision_mode(params, expected):
    assert effective_precision_mode(parse(**params)) == expected
    assert effective_precision_mode(params) == expected


def test_effective_precision_mode_rejects_an_invalid_mapping_value():
    with pytest.raises(ConfigError, match="precision_mode value 'fp17'"):
        effective_precision_mode({"precision_mode": "fp17"})


@pytest.mark.parametrize("mode, expected", [
    ("allow_mix_precision", True), ("allow_mix_precision_fp16", True), ("allow_mix_precision_bf16", True),
    ("mixed_float16", True), ("mixed_bfloat16", True), ("allow_fp32_to_fp16", False), ("force_fp16", False),
    ("allow_fp32_to_bf16", False), ("cube_fp16in_fp32out", False),
])
def test_is_mix_precision(mode, expected):
    assert is_mix_precision(mode) is expected


def test_options_is_exported_type():
    assert isinstance(parse(), Options)
