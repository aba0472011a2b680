"""The picture of a real model, ResNet-50's training graph, in headless Chromium at 1400x900 and 800x600.

What a user relies on, read from the page's own account of its first view (data-view, see
testing/browser.view_state) and from screenshots: it opens on the model's layers inside the GeOp
body, readably, with the legend out of the way and the header whole; edges do not cross boxes; a
search for a Conv2D that fusion removed lands on its fused op; with estimated times in the rows it
offers an "estimated time" colouring. One ResNet-50 report serves every test (building it is most
of the cost). Chromium is required as in test_picture_screenshots.py. NPU_SIM_SCREENSHOT_DIR keeps
the screenshots.
"""

import os
import shutil

import numpy as np
import pytest

import npu_sim_bridge
from npu_sim_bridge.report.picture import render_html
from npu_sim_bridge.report.views import picture_data
from npu_sim_bridge.testing import browser, models

CHROMIUM = browser.find_chromium()
if CHROMIUM is None:
    MESSAGE = ("Chromium is not installed, so the ResNet-50 picture tests DID NOT RUN: install it "
               "(apt-get install chromium) or set NPU_SIM_CHROMIUM to a Chrome/Chromium binary")
    if os.environ.get("NPU_SIM_REQUIRE_CHROMIUM") == "1":
        pytest.fail(MESSAGE, pytrace=False)
    pytestmark = pytest.mark.skip(reason=MESSAGE)

READABLE_PX = 10      # the smallest label height a person reads without zooming
LEGEND_SHARE = 0.2    # the most of the window's width the open legend may take
WINDOWS = [(1400, 900), (800, 600)]
BACKGROUND = (238, 241, 243)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """ResNet-50's rewritten training graph: (result, picture data, page path)."""
    model = models.resnet50(batch_size=1, image_size=32, num_classes=10)
    result = npu_sim_bridge.rewrite(model.meta_graph_def(), {"mix_compile_mode": True,
                                                             "precision_mode": "allow_mix_precision"},
                                    fetches=model.fetch_names())
    data = picture_data(result.report, result.graph_def)
    path = tmp_path_factory.mktemp("resnet_picture") / "resnet50.html"
    path.write_text(render_html(data), encoding="utf-8")
    return result, data, str(path)


def keep(png):
    folder = os.environ.get("NPU_SIM_SCREENSHOT_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        shutil.copy(png, folder)


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_resnet50_opens_on_its_layers_readably(resnet, tmp_path, window):
    _, data, page = resnet
    view = browser.view_state(browser.dump_dom(CHROMIUM, page, window=window))
    largest = max(data["geops"], key=lambda g: sum(1 for n in data["nodes"] if n["g"] == data["geops"].index(g)))
    assert view["focus"] == largest                      # the GeOp body, not the host variables around it
    assert view["modes"] == ["lists"]                    # no estimate in the rows: no time colours offered
    assert view["nodes"] >= 5 and view["inGeop"] == view["nodes"], view
    assert view["ops"].get("_FusedConv2D", 0) >= 1, view["ops"]   # a model layer's op (Conv2D fused with its bias)
    assert view["labelPx"] >= READABLE_PX
    assert view["focusSize"][1] > 3 * view["focusSize"][0], view["focusSize"]  # layered top to bottom, not a row
    assert view["lines"] >= 20 and view["crossing"] == 0, view  # edges go around boxes, not through them
    assert not view["barClipped"] and not view["legendClipped"]
    if window[0] < 1000:
        assert not view["legendOpen"]                     # a narrow window opens with the legend closed
    else:
        assert view["legendOpen"] and view["legendPx"] <= LEGEND_SHARE * window[0]
    png = str(tmp_path / f"resnet50_{window[0]}x{window[1]}.png")
    browser.screenshot(CHROMIUM, page, png, window=window)
    keep(png)
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    assert (image.shape[1], image.shape[0]) == window
    drawn = np.abs(image[view["barPx"]:] - np.array(BACKGROUND, np.int16)).max(axis=2) > 12
    assert drawn.mean() > 0.3, f"{png}: only {drawn.mean():.0%} of the window is drawn"


def test_search_for_a_conv2d_fusion_removed_lands_on_its_fused_op(resnet):
    _, data, page = resnet
    assert data["fused"]["conv2_block1_1_conv/Conv2D"] == "conv2_block1_1_conv/BiasAdd"
    dom = browser.dump_dom(CHROMIUM, page, fragment="#q=conv2_block1_1_conv/Conv2D", window=WINDOWS[0])
    assert ('<span id="count">1/' in dom and ": conv2_block1_1_conv/BiasAdd, the fused _FusedConv2D that runs "
            "conv2_block1_1_conv/Conv2D</span>" in dom), dom[dom.find('id="count"'):][:300]


def with_estimates(data):
    """The picture data with every row's estimated unit and time, as an estimated report gives them."""
    timed = dict(data, nodes=[dict(row) for row in data["nodes"]])
    for row in timed["nodes"]:
        unit = "cube" if row["o"] in ("_FusedConv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter") else \
            "host" if row["g"] < 0 else "vector"
        row["npu_unit"], row["npu_us"] = (unit, 120.0 if unit == "cube" else 2.5) if row["o"] != "NoOp" else (None, None)
    return timed


def test_picture_data_carries_the_estimate_a_report_holds(resnet):
    result, data, _ = resnet
    assert not any("npu_us" in row for row in data["nodes"])  # no estimate: no time keys, no time colours
    report = result.report
    report.estimate = {"summary": {}, "nodes": {"conv1_conv/BiasAdd": ("cube", 88.0)}}
    try:
        rows = picture_data(report, result.graph_def)["nodes"]
    finally:
        report.estimate = None
    conv = [row for row in rows if row["n"] == "conv1_conv/BiasAdd"]
    assert conv and all((row["npu_unit"], row["npu_us"]) == ("cube", 88.0) for row in conv)
    assert all("npu_us" in row for row in rows)


def test_estimated_time_colours_when_the_rows_carry_times(resnet, tmp_path):
    _, data, _ = resnet
    page = tmp_path / "timed.html"
    page.write_text(render_html(with_estimates(data)), encoding="utf-8")
    dom = browser.dump_dom(CHROMIUM, str(page), fragment="#colour=time&q=conv1_conv/BiasAdd", window=WINDOWS[0])
    view = browser.view_state(dom)
    assert view["modes"] == ["lists", "time"] and view["colour"] == "time"
    assert "fill: estimated time per step" in dom and "cube: " in dom
    info = dom[dom.find('id="info"'):][:600]
    assert "estimated: 120 \u00b5s per step on cube" in info, info   # the node's details name its unit
