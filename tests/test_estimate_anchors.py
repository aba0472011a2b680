"""After calibration the two measured 910 throughputs are within 15%: the models built at the anchors' batches.

Building ResNet-50 (batch 256) and BERT-Large (batch 96) takes about 40 s on two cores (shapes are static,
no tensor is allocated), so both are built once for the module.
"""

import pytest

from npu_sim_bridge.estimate import calibrate
from npu_sim_bridge.estimate.hardware import FITTED, hardware


@pytest.fixture(scope="module")
def pairs():
    return calibrate.anchor_steps()


def test_both_anchors_within_15_percent(pairs):
    for anchor, step in pairs:
        err = calibrate.error(step, anchor)
        assert abs(err) <= 0.15, f"{anchor.name}: {step.samples_per_s:.0f}/s vs {anchor.samples_per_s:.0f}/s"


def test_the_table_holds_what_the_fit_finds(pairs):
    fitted = calibrate.fit(pairs)
    assert set(fitted) == set(calibrate.fitted_keys()) == {"cube_efficiency", "vector_traffic"}
    for key, value in fitted.items():
        assert hardware().constants[key].source == FITTED
        assert value == pytest.approx(hardware()[key], rel=0.05), key


def test_cube_peak_share_matches_the_facts_file(pairs):
    # The facts file: the measured runs reach about 20% (ResNet-50) and 27% (BERT-Large) of the fp16 cube peak,
    # counting 2 FLOPs per multiply-accumulate as the estimate does; the estimate's cube FLOPs must agree.
    expected = {"resnet50": 0.20, "bert": 0.27}
    for anchor, step in pairs:
        share = step.cube_flops / (1 / anchor.samples_per_s * anchor.batch * hardware().cube_flops)
        assert share == pytest.approx(expected[anchor.builder], rel=0.25), anchor.name
