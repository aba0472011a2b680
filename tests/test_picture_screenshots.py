"""The HTML picture in a real browser: headless Chromium screenshots at 68, 1k and 10k nodes.

Chromium is required: CI (.ci/run) installs it and sets NPU_SIM_REQUIRE_CHROMIUM=1, so there a missing
browser fails. Elsewhere the tests are skipped with a reason that says so (pytest -rs lists it).
Set NPU_SIM_SCREENSHOT_DIR to keep the screenshots.
"""

import functools
import os
import re
import shutil

import numpy as np
import pytest

import npu_sim_bridge
from npu_sim_bridge.report.picture import render_html
from npu_sim_bridge.report.views import picture_data
from npu_sim_bridge.testing import browser
from npu_sim_bridge.testing.synthetic import scoped_graph

CHROMIUM = browser.find_chromium()
if CHROMIUM is None:
    MESSAGE = ("Chromium is not installed, so the picture's screenshot tests DID NOT RUN: install it "
               "(apt-get install chromium) or set NPU_SIM_CHROMIUM to a Chrome/Chromium binary")
    if os.environ.get("NPU_SIM_REQUIRE_CHROMIUM") == "1":
        pytest.fail(MESSAGE, pytrace=False)
    pytestmark = pytest.mark.skip(reason=MESSAGE)

BACKGROUND = (238, 241, 243)


@functools.lru_cache(maxsize=None)
def _picture_html(nodes):
    result = npu_sim_bridge.rewrite(scoped_graph(nodes), {"mix_compile_mode": True,
                                                           "sim_passes": "placement,precision,partition"},
                                    fetches=["out"])
    data = picture_data(result.report, result.graph_def)
    return render_html(data), data


def picture(tmp_path, nodes):
    """The page of a synthetic graph of about `nodes` nodes (built once per size), written under tmp_path."""
    page, data = _picture_html(nodes)
    path = tmp_path / f"graph_{nodes}.html"
    path.write_text(page, encoding="utf-8")
    return str(path), data


def check_screenshot(png):
    """Size, and drawn content spread over the window; returns in how many cells of an 8x8 grid it is drawn."""
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    assert (image.shape[1], image.shape[0]) == browser.WINDOW
    canvas = image[40:, :-280]  # below the bar, left of the legend
    drawn = np.abs(canvas - np.array(BACKGROUND, np.int16)).max(axis=2) > 12
    assert drawn.mean() > 0.04, f"{png}: only {drawn.mean():.1%} of the picture area is drawn"
    colours = np.unique(canvas.reshape(-1, 3), axis=0)
    assert len(colours) > 40, f"{png}: the picture has almost no colours"
    rows, cols = drawn.shape
    grid = drawn[: rows - rows % 8, : cols - cols % 8].reshape(8, rows // 8, 8, cols // 8)
    return int(grid.any(axis=(1, 3)).sum())


def keep(png):
    folder = os.environ.get("NPU_SIM_SCREENSHOT_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        shutil.copy(png, folder)


# The page opens on the body of the largest GeOp at a readable zoom, not on the whole graph shrunk to fit:
# a synthetic graph (a chain of blocks) fills the window's height as a column of readable boxes.
@pytest.mark.parametrize("nodes, spread", [(68, 16), (1000, 20), (10000, 20)])
def test_screenshot_of_the_picture_is_drawn_across_the_window(tmp_path, nodes, spread):
    html, data = picture(tmp_path, nodes)
    assert abs(data["totals"]["nodes"] - nodes) <= 10
    png = str(tmp_path / f"picture_{nodes}.png")
    browser.screenshot(CHROMIUM, html, png)
    keep(png)
    assert check_screenshot(png) >= spread


def test_a_10k_node_page_opens_readable_and_draws(tmp_path):
    html, data = picture(tmp_path, 10000)
    dom = browser.dump_dom(CHROMIUM, html)
    assert re.search(r'data-render-ms="\d+"', dom), "the page never finished its first drawing"
    boxes = int(re.search(r"showing (\d+) boxes", dom).group(1))
    assert 10 <= boxes <= 200  # groups, not 10,000 boxes, at first sight


def test_search_opens_the_scopes_around_an_exact_match(tmp_path):
    html, data = picture(tmp_path, 1000)
    png = str(tmp_path / "search_1000.png")
    browser.screenshot(CHROMIUM, html, png, fragment="#q=stage_3/block_2/relu")
    keep(png)
    check_screenshot(png)
    dom = browser.dump_dom(CHROMIUM, html, fragment="#q=stage_3/block_2/relu")
    # The exact name comes first, ahead of names that only contain it (stage_3/block_2/relu_1 would).
    assert re.search(r'<span id="count">1/\d+: stage_3/block_2/relu</span>', dom)
