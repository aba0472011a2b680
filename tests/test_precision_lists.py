"""modify_mixlist (seed 000): the file format, every rule of the seed, IR names, errors and the CLI."""

import json
import warnings

import pytest

from npu_sim_bridge.cli.main import main as cli_main
from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.ops_info import load_library
from npu_sim_bridge.passes.precision.lists import (
    EffectiveLists,
    MixlistWarning,
    load_mixlist,
    parse_mixlist,
    strip_comments,
)

# The example of seed 000, comments included.
SEED_EXAMPLE = """{
  "black-list": {    // 黑名单
     "to-remove": [  // 黑名单算子转换为灰名单算子
     "Xlog1py"
     ],
     "to-add": [     // 白名单或灰名单算子转换为黑名单算子
     "Matmul",
     "Cast"
     ]
  },
  "white-list": {    // 白名单
     "to-remove": [  // 白名单算子转换为灰名单算子
     "Conv2D"
     ],
     "to-add": [     // 黑名单或灰名单算子转换为白名单算子
     "Bias"
     ]
  }
}"""


@pytest.fixture(scope="module")
def library():
    return load_library()


def lists_for(library, text, path="mixlist.json"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixlistWarning)
        return EffectiveLists(library, parse_mixlist(text, path))


def colour(lists, op):
    entry = lists.classify(op)
    return entry.colour, entry.rule


def test_builtin_lists_follow_the_operator_library(library):
    lists = EffectiveLists(library)
    assert colour(lists, "MatMul") == ("white", "white list")
    assert colour(lists, "Log") == ("black", "black list")
    assert colour(lists, "Relu") == ("gray", "gray list")


def test_comments_are_blanked_but_strings_and_positions_kept():
    text = '{"a": "x//y/*z*/", // line\n "b": /* block\n more */ 1}'
    stripped = strip_comments(text)
    assert json.loads(stripped) == {"a": "x//y/*z*/", "b": 1}
    assert stripped.count("\n") == text.count("\n") and len(stripped) == len(text)


def test_seed_example_with_comments(library):
    with pytest.warns(MixlistWarning, match="'Matmul'.*did you mean 'MatMul'"):
        lists = EffectiveLists(library, parse_mixlist(SEED_EXAMPLE, "ops_info.json"))
    assert colour(lists, "Xlog1py") == ("gray", "modify_mixlist black-list to-remove")
    assert colour(lists, "Cast") == ("black", "modify_mixlist black-list to-add")
    assert colour(lists, "Conv2D") == ("gray", "modify_mixlist white-list to-remove")
    assert colour(lists, "MatMul") == ("white", "white list")  # "Matmul" is not an op type: ignored
    assert any("'Matmul'" in text for text in lists.warnings)


def test_black_to_add_of_a_white_op_ends_black(library):
    lists = lists_for(library, '{"black-list": {"to-add": ["MatMul"]}}')
    assert colour(lists, "MatMul") == ("black", "modify_mixlist black-list to-add")


def test_black_to_add_plus_white_to_remove_ends_black(library):
    lists = lists_for(library, '{"black-list": {"to-add": ["MatMul"]}, "white-list": {"to-remove": ["MatMul"]}}')
    assert colour(lists, "MatMul") == (
        "black", "modify_mixlist black-list to-add, white-list to-remove")


def test_remove_only_ends_gray(library):
    lists = lists_for(library, '{"white-list": {"to-remove": ["MatMul"]}, "black-list": {"to-remove": ["Log"]}}')
    assert colour(lists, "MatMul") == ("gray", "modify_mixlist white-list to-remove")
    assert colour(lists, "Log") == ("gray", "modify_mixlist black-list to-remove")


def test_white_to_add_of_a_gray_op_ends_white(library):
    lists = lists_for(library, '{"white-list": {"to-add": ["Relu"]}}')
    assert colour(lists, "Relu") == ("white", "modify_mixlist white-list to-add")


def test_ir_names_stand_for_their_tensorflow_ops(library):
    lists = lists_for(library, '{"black-list": {"to-add": ["MatMulV2", "SoftmaxV2"]}, '
                               '"white-list": {"to-add": ["ReduceSumD"]}}')
    assert colour(lists, "MatMul") == ("black", "modify_mixlist black-list to-add (MatMulV2)")
    assert colour(lists, "Softmax")[0] == "black"
    assert colour(lists, "Sum") == ("white", "modify_mixlist white-list to-add (ReduceSumD)")


def test_removing_from_a_list_the_op_is_not_in_changes_nothing(library):
    with pytest.warns(MixlistWarning, match="op Relu is gray, not black; it is left as it is"):
        lists = EffectiveLists(library, parse_mixlist('{"black-list": {"to-remove": ["Relu"]}}', "m.json"))
    assert colour(lists, "Relu") == ("gray", "gray list")


def test_unknown_name_is_a_warning_naming_it(library):
    with pytest.warns(MixlistWarning, match="names 'NoSuchOp'.*it is ignored"):
        lists = EffectiveLists(library, parse_mixlist('{"white-list": {"to-add": ["NoSuchOp"]}}', "m.json"))
    assert lists.warnings and "'m.json'" in lists.warnings[0]


@pytest.mark.parametrize("text, message", [
    ('{"black-list": {"to-add": ["Relu"]}, "white-list": {"to-add": ["Relu"]}}',
     "op Relu is in black-list to-add and in white-list to-add"),
    ('{"white-list": {"to-add": ["Relu"], "to-remove": ["Relu"]}}',
     "op Relu is both in white-list to-add and white-list to-remove"),
])
def test_contradictions_are_errors(library, text, message):
    with pytest.raises(ConfigError, match=message):
        lists_for(library, text)


@pytest.mark.parametrize("text, message", [
    ('{"black-list": {"to-add": ["Relu" "Exp"]}}', r"is not valid JSON: .* at line 1, column \d+"),
    ('{\n  "black-list": {\n    "to-add": ["Relu"\n  }\n}', r"not valid JSON: .* at line 4, column 3"),
    ('["Relu"]', "must hold a JSON object"),
    ('{"black_list": {"to-add": ["Relu"]}}', "unknown section 'black_list' \\(did you mean 'black-list'\\?\\)"),
    ('{"black-list": {"to_add": ["Relu"]}}', "unknown key 'to_add' \\(did you mean 'to-add'\\?\\)"),
    ('{"black-list": {"to-add": "Relu"}}', "black-list to-add must be a list of op type names, got a string"),
    ('{"black-list": ["Relu"]}', "'black-list' must be an object"),
    ('{"white-list": {"to-add": ["Relu", 3]}}', "must hold op type names \\(non-empty strings\\), got 3"),
    ('{"white-list": {}, "white-list": {}}', "key 'white-list' appears twice"),
    ('{"white-list": {} /* open', "a /\\* comment opened at line 1, column 19 is never closed"),
])
def test_malformed_files_are_errors_naming_the_file(text, message):
    with pytest.raises(ConfigError, match=message) as caught:
        parse_mixlist(text, "/data/mix.json")
    assert "'/data/mix.json'" in str(caught.value)


def test_missing_file_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=f"modify_mixlist file '{missing}' does not exist"):
        load_mixlist(str(missing))
    with pytest.raises(ConfigError, match="is a directory"):
        load_mixlist(str(tmp_path))


def test_file_on_disk_with_bom(tmp_path, library):
    path = tmp_path / "mix.json"
    path.write_text('\ufeff{"black-list": {"to-add": ["Relu"]}}', encoding="utf-8")
    lists = EffectiveLists(library, load_mixlist(str(path)))
    assert colour(lists, "Relu")[0] == "black"


def test_cli_mixlist_shows_list_and_rule(tmp_path, capsys):
    path = tmp_path / "mix.json"
    path.write_text(SEED_EXAMPLE, encoding="utf-8")
    assert cli_main(["mixlist", "--modify-mixlist", str(path), "Conv2D", "MatMulV2", "Xlog1py", "Nope"]) == 0
    captured = capsys.readouterr()
    lines = {line.split()[0]: line for line in captured.out.splitlines()[1:]}
    assert "gray" in lines["Conv2D"] and "modify_mixlist white-list to-remove" in lines["Conv2D"]
    assert lines["MatMulV2"].split()[1:4] == ["MatMul", "MatMulV2", "white"]
    assert "built-in white list (precision_reduce true)" in lines["MatMulV2"]
    assert "modify_mixlist black-list to-remove" in lines["Xlog1py"]
    assert "unknown op type" in lines["Nope"]
    assert "warning: " in captured.err and "'Matmul'" in captured.err


def test_cli_mixlist_json_lists_the_changed_ops(tmp_path, capsys):
    path = tmp_path / "mix.json"
    path.write_text('{"black-list": {"to-add": ["MatMulV2"]}}', encoding="utf-8")
    assert cli_main(["mixlist", "--json", "--modify-mixlist", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops"] == [{"name": "MatMul", "tf_type": "MatMul", "ir_type": "MatMulV2", "list": "black",
                            "rule": "modify_mixlist black-list to-add (MatMulV2)"}]
    assert data["warnings"] == []


def test_cli_mixlist_bad_file_exits_2_with_the_message(tmp_path, capsys):
    path = tmp_path / "mix.json"
    path.write_text('{"black-list": {"to-add": ["Relu"]', encoding="utf-8")
    assert cli_main(["mixlist", "--modify-mixlist", str(path), "Relu"]) == 1
    assert f"modify_mixlist file '{path}' is not valid JSON" in capsys.readouterr().err
