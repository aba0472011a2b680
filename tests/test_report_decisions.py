"""The report's decision records as columns: handles read and write rows, and nothing is lost on the way."""

import pytest

from npu_sim_bridge.graph.names import TensorRef
from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.decisions import Decisions, InsertedText, NodeDecision
from npu_sim_bridge.report.model import Report


def test_a_record_stored_in_a_report_moves_there_and_its_handle_follows():
    report = Report("g")
    report.nodes["relu"] = made = NodeDecision("relu", "Relu", "gray", "float32", "float32",
                                               reasons=["gray: follows conv"])
    made.placement, made.dtype_after = "device", "float16"  # the handle now writes the report's row
    made.add_reason(reasons.host("scoped"))
    stored = report.nodes["relu"]
    assert stored == made and stored.placement == "device" and stored.dtype_after == "float16"
    assert stored.reason == "gray: follows conv; host: in without_npu_compile_scope"
    assert report.summary["placements"] == {"device": 1} and report.summary["dtype_changes"] == 1


def test_rows_keep_their_order_and_fields_through_the_mapping():
    records = Decisions()
    records.extend(["a", "b"], ["Placeholder", "MatMul"], ["float32", None])
    row = records.add("c", "Cast", dtype_before="float32", dtype_after="float16")
    assert row == 2 and list(records) == ["a", "b", "c"] and len(records) == 3
    assert records.column("dtype_before") == ["float32", None, "float32"]
    assert records.count_differing("dtype_before", "dtype_after") == 1
    records["b"].geop = "GeOp0_0"
    assert [d.geop for d in records.values()] == [None, "GeOp0_0", None]
    assert [name for name, _ in records.items()] == ["a", "b", "c"]
    assert records.get("missing") is None and "missing" not in records
    with pytest.raises(KeyError):
        records["missing"]


def test_marking_many_rows_sets_their_fields_and_records_the_missing_in_the_order_given():
    records = Decisions()
    records.extend(["a", "b"], ["Placeholder", "MatMul"], ["float32", "float32"])
    records["b"].add_reason("kept")
    asked = []
    records.mark(["new_2", "b", "new_1", "a"], lambda name: asked.append(name) or "Cast",
                 placement="device", geop="GeOp3_0")
    assert asked == ["new_2", "new_1"] and list(records) == ["a", "b", "new_2", "new_1"]
    assert records.column("placement") == ["device"] * 4 and records.column("geop") == ["GeOp3_0"] * 4
    assert records["new_1"].op == "Cast" and records["new_1"].dtype_before is None
    assert records["b"].op == "MatMul" and records["b"].reason == "kept"  # nothing else of a row changes
    records.mark(["a"], lambda name: "unused", placement="host", geop=None)
    assert records["a"].placement == "host" and records["a"].geop is None and records["b"].placement == "device"


def test_a_decision_fills_a_new_row_or_sets_only_what_it_says_on_a_recorded_one():
    records = Decisions()
    records.extend(["x", "mm"], ["Placeholder", "MatMul"], ["float32", "float32"])
    records["x"].list = "black"
    records.decide("mm", "MatMul", True, "white", ("float32", "float16"), "white: in the list")
    records.decide("x", "Placeholder", False, None, None, None)  # not listed, no dtypes, no reason
    records.decide("body/relu", "Relu", True, "gray", ("float32", "float16"), "gray: follows mm")
    mm, x, relu = records["mm"], records["x"], records["body/relu"]
    assert (mm.list, mm.dtype_before, mm.dtype_after, mm.reason) == ("white", "float32", "float16",
                                                                      "white: in the list")
    assert (x.list, x.dtype_before, x.dtype_after, x.reason) == ("black", "float32", "float32", "")
    assert list(records) == ["x", "mm", "body/relu"]
    assert (relu.op, relu.list, relu.dtype_after, relu.reason) == ("Relu", "gray", "float16", "gray: follows mm")
    records.decide("mm", "MatMul", True, None, None, "kept: fetched")  # a second word adds its reason
    assert mm.list is None and mm.reason == "white: in the list; kept: fetched"


def test_a_name_is_recorded_once_and_only_records_are_stored():
    records = Decisions()
    records.extend(["a"], ["Relu"], [None])
    with pytest.raises(ValueError, match="each node once"):
        records.extend(["a"], ["Relu"], [None])
    with pytest.raises(ValueError, match="is named 'b'"):
        records["a"] = NodeDecision("b", "Relu")
    with pytest.raises(TypeError, match="NodeDecision values"):
        records["a"] = {"name": "a"}


def test_an_inserted_node_reads_its_sentence_only_when_asked():
    records = Decisions()
    source = TensorRef("mm", 0)
    records.add("mm/NpuSimCast_0_float16", "Cast", dtype_before="float32", dtype_after="float16",
                text=InsertedText("precision", "Cast", source))
    assert 0 not in records._texts and records._inserted[0], "no sentence is formatted before it is read"
    decision = records["mm/NpuSimCast_0_float16"]
    assert decision.reason == "inserted by precision: Cast of mm"
    assert decision.to_dict()["reasons"] == [{"code": "precision.inserted", "what": "Cast", "source": "mm"}]
    assert 0 not in records._texts, "nor kept once read: a row with no text set keeps none"
    decision.add_reason("more")
    assert decision.reason == "inserted by precision: Cast of mm; more"
    assert [r.code for r in decision.reasons] == ["precision.inserted", "text"]


def test_inserted_texts_of_several_kinds_keep_their_own_sentences():
    """The table keeps an inserted node's text as a code for (pass, what) and its source: rows of
    different kinds, and a row whose text is set again, read their own sentence."""
    records = Decisions()
    records.add("a/Cast", "Cast", text=InsertedText("precision", "Cast", TensorRef("a", 0)))
    records.add("b/Round", "NpuSimRound", text=InsertedText("precision", "float16 round trip", TensorRef("b", 1)))
    records.add("c/Cast", "Cast", text=InsertedText("precision", "Cast", TensorRef("c", 2)))
    records.add("plain", "Relu", text="a plain text")
    assert [records[name].reason for name in ("a/Cast", "b/Round", "c/Cast", "plain")] == [
        "inserted by precision: Cast of a", "inserted by precision: float16 round trip of b:1",
        "inserted by precision: Cast of c:2", "a plain text"]
    records.add("b/Round", "NpuSimRound", text="set again")
    records["a/Cast"].reason = "rewritten"
    assert records["b/Round"].reason == "set again" and records["a/Cast"].reason == "rewritten"
    assert records["c/Cast"].reason == "inserted by precision: Cast of c:2"


def test_columns_keep_every_value_past_two_bytes_of_codes():
    """Codes are one byte while a field's vocabulary fits, then two, then four; a graph with more
    distinct values (GeOp names) than that still reads each row's own, also rows recorded in bulk
    after the columns widened, and the other fields keep their one byte."""
    table = Decisions()
    count = (1 << 16) + 5
    for index in range(count):
        table.add(f"n{index}", "Relu", list="white", geop=f"GeOp0_{index}", dtype_before="float32")
    table.extend(["late_a", "late_b"], ["Const", "Const"], ["int32", "float16"])
    assert table["n0"].geop == "GeOp0_0" and table[f"n{count - 1}"].geop == f"GeOp0_{count - 1}"
    assert table[f"n{count - 2}"].list == "white"
    assert (table["late_a"].dtype_before, table["late_b"].dtype_after, table["late_b"].geop) == ("int32", "float16", None)
    table["n3"].geop = "GeOp9_9"
    assert table["n3"].geop == "GeOp9_9" and table["n4"].geop == "GeOp0_4"
    assert table._coded["geop"].typecode == "I" and table._coded["list"].typecode == "B"
    assert table.count_differing("dtype_before", "dtype_after") == count  # float32 -> None; the late rows keep theirs


def test_reasons_keep_their_order_before_and_after_they_are_read():
    """Two or more reasons are held as a tuple until read; reading and adding more keeps every one."""
    table = Decisions()
    row = table.add("n", "Relu")
    for text in ("first", "second", "third"):
        table.add_reason(row, text)
    assert table.reason(row) == "first; second; third"
    table.add_reason(row, reasons.host("full_sink"))
    assert table.reason(row).startswith("first; second; third; host: ")
    assert [value.text() for value in table.reasons(row)][:3] == ["first", "second", "third"]
    table.add_reason(row, "fifth")
    assert len(table.reasons(row)) == 5 and table.reason(row).endswith("; fifth")
