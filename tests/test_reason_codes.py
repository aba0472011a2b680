"""Placement reasons are coded: a code with a template gives its reason, an unknown code is refused."""

import pytest

from npu_sim_bridge.report import reasons


def test_a_known_host_code_gives_its_coded_reason():
    reason = reasons.host("scoped")
    assert reason.code == "host.scoped" and reason.is_host
    assert reasons.host("not_device_op", op="Log", note="").code == "host.not_device_op"


def test_an_unknown_host_code_is_refused_naming_it():
    with pytest.raises(ValueError, match="unknown host reason code 'no_such_code'"):
        reasons.host("no_such_code")
    with pytest.raises(ValueError, match="unknown host reason code 'no_such_code'"):
        reasons.host("no_such_code", op="Relu")


def test_every_decision_family_has_codes():
    for family in ("host", "layout", "precision", "fusion", "dtypes", "hub"):
        assert reasons.codes(family), family
    assert {"precision.white_list", "precision.black_list", "precision.gray_follows", "precision.keep_dtype",
            "precision.modify_mixlist", "fusion.fused_into", "fusion.fused_by", "fusion.switched_off",
            "dtypes.customize", "hub.control"} <= set(reasons.codes())
    assert "text" not in reasons.codes()


def test_an_unknown_code_of_any_family_is_refused_naming_it():
    with pytest.raises(ValueError, match="unknown reason code 'precision.no_such_rule': add a template"):
        reasons.reason("precision.no_such_rule", rule="white list")
    with pytest.raises(ValueError, match="unknown reason code 'text'"):  # free text is no coded reason
        reasons.reason("text", text="anything")


def test_a_pass_inserting_nodes_needs_a_code_for_them():
    from npu_sim_bridge.report.decisions import Decisions, InsertedText

    records = Decisions()
    with pytest.raises(ValueError, match="unknown reason code 'nosuchpass.inserted'"):
        records.add("x/Cast", "Cast", text=InsertedText("nosuchpass", "Cast", "x"))


@pytest.mark.parametrize("code, details, text", [
    # The sentence people read in the report, per family, from the code and its details.
    ("precision.gray_follows", {"rule": "gray list", "node": "mm", "dtype": "float32"}, "gray: follows mm (float32)"),
    ("precision.gray_follows", {"rule": "modify_mixlist white-list to-remove", "node": "mm"},
     "gray (modify_mixlist white-list to-remove): follows mm"),
    ("precision.source", {"dtype": "float64"}, "source: keeps its dtype"),
    ("precision.variable", {"kind": "variable", "dtype": "float16"}, "variable: keeps float16"),
    ("precision.no_op_info", {"note": "a TF-only op", "dtype": "float32"},
     "no op info in the operator library (a TF-only op): keeps float32"),
    ("fusion.fused_by", {"rule": "R", "nodes": ["a", "b"], "ops": ["MatMul", "BiasAdd"], "op": "_FusedMatMul"},
     "fused by R: a (MatMul) + b (BiasAdd) -> _FusedMatMul"),
    ("fusion.remapper_unfused", {"ops": ["MatMul", "BiasAdd"], "fused": "_FusedMatMul"},
     "Grappler's remapper had fused MatMul + BiasAdd into _FusedMatMul; taken apart so that the NPU's fusion "
     "rules (fusion_switch_file) decide"),
    ("dtypes.customize", {"path": "/d.cfg", "line": 3, "op_type": "MatMulV2"},
     "customize_dtypes '/d.cfg' line 3 (op type MatMulV2): keeps float32"),
    ("hub.control", {"inputs": 4, "readers": 3, "saved": 5},
     "inserted: waits on the 4 control inputs 3 nodes shared, and they wait on it instead (5 edges fewer)"),
])
def test_a_coded_reason_renders_the_sentence_people_read(code, details, text):
    made = reasons.reason(code, **details)
    assert made.text() == text and not made.is_host
    assert made.to_dict() == {"code": code, **details}


def test_a_precision_rewrite_gives_coded_reasons_and_the_same_text():
    import tensorflow as tf

    import npu_sim_bridge

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        w = tf.constant([[1.0], [2.0], [3.0]], name="w")
        tf.identity(tf.nn.relu(tf.matmul(x, w, name="mm"), name="relu"), name="out")
    result = npu_sim_bridge.rewrite(graph.as_graph_def(), {"precision_mode": "allow_mix_precision"}, fetches=["out"])
    nodes = result.report.nodes
    assert [r.code for r in nodes["mm"].reasons] == ["precision.white_list"]
    assert [(r.code, r.get("node")) for r in nodes["relu"].reasons] == [("precision.gray_follows", "mm")]
    casts = [d for d in nodes.values() if d.op == "Cast" and d.reasons and d.reasons[0].code == "precision.inserted"]
    assert casts and all(d.reason == f"inserted by precision: {d.reasons[0].get('what')} of "
                                     f"{d.reasons[0].get('source')}" for d in casts)
    coded = {r["code"] for node in result.report.to_dict()["nodes"] for r in node["reasons"]}
    assert "text" not in coded, "every reason the rewrite gives is coded"
