"""The HTML picture at 68, 1k and 10k nodes (and a ResNet-50 training graph): build and render times side by side.

Columns: nodes drawn in the page, edges, Python time to build the page (picture_data + render_html), its
size, Chromium's time from script start to the first drawing (the page's data-render-ms, median of 3),
the wall time of one headless screenshot (browser start included), and how many boxes the page opens
with. Needs Chromium (apt-get install chromium, or NPU_SIM_CHROMIUM).
"""

import os
import re
import statistics
import sys
import tempfile
import time

os.environ.setdefault("NPU_SIM_SKIP_NATIVE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.report.picture import render_html  # noqa: E402
from npu_sim_bridge.report.views import picture_data  # noqa: E402
from npu_sim_bridge.testing import browser  # noqa: E402
from npu_sim_bridge.testing.synthetic import scoped_graph  # noqa: E402


def graphs():
    for size in (68, 1000, 10000):
        yield f"synthetic {size}", scoped_graph(size), ["out"], {"sim_passes": "placement,precision,partition"}
    from npu_sim_bridge.testing import models

    model = models.resnet50(batch_size=1, image_size=32, num_classes=10)
    yield "ResNet-50 training", model.meta_graph_def(), model.fetch_names(), {"precision_mode": "allow_mix_precision"}


def main() -> int:
    chromium = browser.find_chromium()
    if chromium is None:
        print("Chromium not found: apt-get install chromium, or set NPU_SIM_CHROMIUM", file=sys.stderr)
        return 1
    folder = tempfile.mkdtemp(prefix="npu_sim_picture_")
    header = f"{'graph':20} {'nodes':>6} {'edges':>6} {'page (s)':>9} {'KiB':>6} {'first draw (ms)':>16} " \
             f"{'screenshot (s)':>15} {'boxes':>6}"
    print(header)
    for name, graph, fetches, options in graphs():
        result = npu_sim_bridge.rewrite(graph, {"mix_compile_mode": True, **options}, fetches=fetches)
        started = time.perf_counter()
        data = picture_data(result.report, result.graph_def)
        page = render_html(data)
        build = time.perf_counter() - started
        path = os.path.join(folder, name.replace(" ", "_") + ".html")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
        draws, boxes = [], 0
        for _ in range(3):
            dom = browser.dump_dom(chromium, path)
            draws.append(int(re.search(r'data-render-ms="(\d+)"', dom).group(1)))
            boxes = int(re.search(r"showing (\d+) boxes", dom).group(1))
        shot = browser.screenshot(chromium, path, path[:-5] + ".png")
        print(f"{name:20} {data['totals']['nodes']:>6} {data['totals']['edges']:>6} {build:>9.2f} "
              f"{len(page) // 1024:>6} {statistics.median(draws):>16.0f} {shot:>15.2f} {boxes:>6}")
    print(f"pages and screenshots in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
