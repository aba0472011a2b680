"""Decision records keep reasons as values and render their text only when it is read."""

from npu_sim_bridge.report import reasons
from npu_sim_bridge.report.model import NodeDecision, Report


def test_reason_text_is_rendered_from_the_values_in_order():
    decision = NodeDecision(name="n", op="Log")
    decision.add_reason("gray: follows mm")
    decision.add_reason(reasons.host("not_device_op", op="Log", note=""))
    assert decision.reason == "gray: follows mm; host: op type Log is not in the device op list"
    decision.add_reason(reasons.host("scoped"))  # added after a read: appended to the text
    assert decision.reason.endswith("; host: in without_npu_compile_scope")
    assert [r.code for r in decision.reasons] == ["text", "host.not_device_op", "host.scoped"]
    assert decision.host_reason().code == "host.not_device_op"


def test_one_reason_and_several_read_alike_whether_given_or_added():
    given = NodeDecision(name="n", op="Relu", reasons=["white: listed"])
    added = NodeDecision(name="n", op="Relu")
    added.add_reason("white: listed")
    assert given == added and given.reason == added.reason == "white: listed"
    assert [r.to_dict() for r in added.reasons] == [{"code": "text", "text": "white: listed"}]
    # A second reason, added before or after the first was read, follows it.
    given.add_reason(reasons.host("scoped"))
    assert given.reason == "white: listed; host: in without_npu_compile_scope"
    two = NodeDecision(name="n", op="Relu", reasons=["white: listed", reasons.host("scoped")])
    assert two == given and two.reason == given.reason and two.host_reason().code == "host.scoped"
    assert NodeDecision(name="n", op="Relu", reasons=[]).reasons == []


def test_given_text_and_set_text_stay_ahead_of_later_reasons():
    inserted = NodeDecision(name="c", op="Cast", reason="inserted by precision: Cast of mm")
    assert inserted.reason == "inserted by precision: Cast of mm" and inserted.reasons == []
    inserted.add_reason("more")
    assert inserted.reason == "inserted by precision: Cast of mm; more"
    inserted.reason = "replaced"
    assert inserted.reason == "replaced"
    inserted.add_reason(reasons.host("fed"))
    assert inserted.reason == "replaced; host: fed by the session, so it keeps its name outside the GeOps"


def test_json_form_holds_text_and_values():
    report = Report("g")
    report.nodes["n"] = decision = NodeDecision(name="n", op="Relu", list="gray")
    decision.add_reason(reasons.host("while_frame", frame="w", node="p", cause=reasons.host("py_func", op="PyFunc")))
    node = report.to_dict()["nodes"][0]
    assert list(node) == ["name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason",
                          "reasons"]
    assert node["reason"] == "host: v1 while frame w holds host op p (PyFunc runs on the host)"
    assert node["reasons"] == [{"code": "host.while_frame", "frame": "w", "node": "p",
                                "cause": {"code": "host.py_func", "op": "PyFunc"}}]
    assert NodeDecision(name="n", op="Relu") == NodeDecision(name="n", op="Relu")


def test_a_record_made_with_its_list_and_reasons_reads_as_one_filled_in_later():
    made = NodeDecision("conv", "Conv2D", "white", "float32", "float16", reasons=["white list"])
    later = NodeDecision("conv", "Conv2D")
    later.list, later.dtype_before, later.dtype_after = "white", "float32", "float16"
    later.add_reason("white list")
    assert made == later and made.reason == "white list" and made.list == "white"


def test_a_host_reason_without_details_is_one_value_for_every_node():
    """Every node of a dropped segment gets the same reason: one value, which reads like any other."""
    first, second = reasons.host("full_sink"), reasons.host("full_sink")
    assert first is second and first.code == "host.full_sink" and dict(first.details) == {}
    assert first.text() == second.text() and first.text().startswith("host: ")
    assert reasons.host("trivial_segment") is not first
    with_details = reasons.host("py_func", op="PyFunc")
    assert with_details is not reasons.host("py_func", op="PyFunc") and with_details.get("op") == "PyFunc"


def test_one_lazy_reason_on_several_nodes_reads_as_each_nodes_reason():
    class Merged(reasons.LazyReason):
        __slots__ = ()

        def reason_for(self, name):
            if name == "root":
                return reasons.reason("fusion.fused_by", rule="R", nodes=["part", "root"], ops=["Relu", "Relu"],
                                      op="Fused")
            return reasons.reason("fusion.fused_into", root="root", op="Fused", rule="R")

    shared = Merged()
    report = Report("g")
    for name in ("part", "root"):
        report.nodes[name] = NodeDecision(name=name, op="Relu")
        report.nodes[name].add_reason(shared)
    report.nodes["part"].add_reason("white: listed")
    assert report.nodes["root"].reason == "fused by R: part (Relu) + root (Relu) -> Fused"
    assert report.nodes["part"].reason == "fused into root (Fused) by R; white: listed"
    # A record made on its own and stored in the report reads the same before and after.
    alone = NodeDecision(name="other", op="Relu", reasons=[shared])
    assert alone.reason == "fused into root (Fused) by R"
    report.nodes["other"] = alone
    assert [r.to_dict() for r in report.nodes["other"].reasons] == [
        {"code": "fusion.fused_into", "root": "root", "op": "Fused", "rule": "R"}]
