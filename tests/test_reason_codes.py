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
