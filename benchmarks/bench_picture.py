"""The HTML picture at 68, 1k and 10k nodes and on ResNet-50's training graph: build, layout and render times.

Columns: nodes drawn in the page, edges, Python time to build the page (picture_data + render_html), its
size, Chromium's time from script start to the first drawing (the page's data-render-ms, median of 3),
the page's own layout time at first sight (data-layout-ms, median of 3) and with every group open
(#expand=all), the wall time of one headless screenshot, how many boxes the page opens with, and the
label height in pixels of its first view.

With --dagre PATH (dagre.min.js of `npm pack @dagrejs/dagre`), the last columns are dagre's times in the
same browser to lay out the top level of the largest GeOp's body (its scopes as boxes and its ops, with
the edges between them), and every node at once (what the page lays out with every group open; given up
after DAGRE_SECONDS): the comparison of the page's own layered layout with the library TensorBoard and
Netron use. Needs Chromium (apt-get install chromium, or NPU_SIM_CHROMIUM).

  .venv/bin/python benchmarks/bench_picture.py [--dagre PATH] [--sizes 68,1000,10000] [--no-resnet]
"""

import argparse
import json
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

DAGRE_SECONDS = 150
DAGRE_PAGE = """<!DOCTYPE html><html><body><script>{library}</script><script>
const graph = {graph};
const started = performance.now();
const g = new dagre.graphlib.Graph(); g.setGraph({{rankdir: "TB", nodesep: 30, ranksep: 34}}); g.setDefaultEdgeLabel(() => ({{}}));
graph.units.forEach((u, k) => g.setNode(String(k), {{width: u[0], height: u[1]}}));
graph.edges.forEach(([a, b]) => g.setEdge(String(a), String(b)));
let error = "";
try {{ dagre.layout(g); }} catch (e) {{ error = String(e); }}
document.body.dataset.dagreMs = String(Math.round(performance.now() - started));
document.body.dataset.error = error;
</script></body></html>"""


def graphs(sizes, resnet):
    for size in sizes:
        yield f"synthetic {size}", scoped_graph(size), ["out"], {"sim_passes": "placement,precision,partition"}
    if resnet:
        from npu_sim_bridge.testing import models

        model = models.resnet50(batch_size=1, image_size=32, num_classes=10)
        yield ("ResNet-50 training", model.meta_graph_def(), model.fetch_names(),
               {"precision_mode": "allow_mix_precision"})


def body_top(data):
    """The members of the largest GeOp's body at its top level (scopes as boxes, ops) and the edges between
    them: what the page lays out first. Boxes are given the page's sizes of closed groups and ops."""
    groups, nodes = data["groups"], data["nodes"]
    sizes = [0] * len(groups)
    for node in nodes:
        s = node["s"]
        while s >= 0:
            sizes[s] += 1
            s = groups[s]["p"]
    geops = [k for k, g in enumerate(groups) if g["p"] < 0 and g["g"] >= 0]
    if not geops:
        return None
    top = max(geops, key=lambda k: sizes[k])
    member = {}
    for k, g in enumerate(groups):
        if g["p"] == top:
            member[("g", k)] = len(member)
    units = [[160, 44]] * len(member)
    for i, node in enumerate(nodes):
        s, last = node["s"], None
        while s >= 0 and s != top:
            last, s = s, groups[s]["p"]
        if s == top and last is None:
            member[("n", i)] = len(units)
            units.append([150, 34])
    where = {}
    for i, node in enumerate(nodes):
        s, last = node["s"], None
        while s >= 0 and s != top:
            last, s = s, groups[s]["p"]
        if s == top:
            where[i] = member[("g", last)] if last is not None else member[("n", i)]
    edges = sorted({(where[a], where[b]) for a, b, _ in data["edges"] if a in where and b in where and where[a] != where[b]})
    return {"units": units, "edges": [list(e) for e in edges]}


def flat(data):
    """Every node as a box and every edge: what the page lays out with every group open."""
    return {"units": [[150, 34]] * len(data["nodes"]), "edges": [[a, b] for a, b, _ in data["edges"]]}


def dagre_ms(chromium, library, graph, folder):
    if graph is None:
        return "-"
    path = os.path.join(folder, "dagre.html")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(DAGRE_PAGE.format(library=library, graph=json.dumps(graph)))
    try:
        dom = browser.dump_dom(chromium, path, timeout=DAGRE_SECONDS, tries=1)
    except RuntimeError:
        return f"over {DAGRE_SECONDS} s"
    error = re.search(r'data-error="([^"]*)"', dom).group(1)
    ms = re.search(r'data-dagre-ms="(\d+)"', dom).group(1)
    return f"{ms} ({len(graph['units'])} boxes)" + (f" FAILED: {error[:40]}" if error else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dagre", help="dagre.min.js to compare the layout with")
    parser.add_argument("--sizes", default="68,1000,10000")
    parser.add_argument("--no-resnet", action="store_true")
    args = parser.parse_args()
    chromium = browser.find_chromium()
    if chromium is None:
        print("Chromium not found: apt-get install chromium, or set NPU_SIM_CHROMIUM", file=sys.stderr)
        return 1
    library = open(args.dagre, encoding="utf-8").read() if args.dagre else None
    folder = tempfile.mkdtemp(prefix="npu_sim_picture_")
    print(f"{'graph':20} {'nodes':>6} {'edges':>6} {'page (s)':>9} {'KiB':>6} {'first draw (ms)':>16} "
          f"{'layout (ms)':>12} {'all open (ms)':>14} {'screenshot (s)':>15} {'boxes':>6} {'label px':>9}"
          + ("  dagre: body top (ms) | all open (ms)" if library else ""))
    for name, graph, fetches, options in graphs([int(s) for s in args.sizes.split(",") if s], not args.no_resnet):
        result = npu_sim_bridge.rewrite(graph, {"mix_compile_mode": True, **options}, fetches=fetches)
        started = time.perf_counter()
        data = picture_data(result.report, result.graph_def)
        page = render_html(data)
        build = time.perf_counter() - started
        path = os.path.join(folder, name.replace(" ", "_") + ".html")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
        draws, layouts, boxes, view = [], [], 0, {}
        for _ in range(3):
            dom = browser.dump_dom(chromium, path)
            draws.append(int(re.search(r'data-render-ms="(\d+)"', dom).group(1)))
            view = browser.view_state(dom)
            layouts.append(view["layoutMs"])
            boxes = int(re.search(r"showing (\d+) boxes", dom).group(1))
        expanded = browser.view_state(browser.dump_dom(chromium, path, fragment="#expand=all", timeout=180))
        shot = browser.screenshot(chromium, path, path[:-5] + ".png")
        print(f"{name:20} {data['totals']['nodes']:>6} {data['totals']['edges']:>6} {build:>9.2f} "
              f"{len(page) // 1024:>6} {statistics.median(draws):>16.0f} {statistics.median(layouts):>12.0f} "
              f"{expanded['layoutMs']:>14} {shot:>15.2f} {boxes:>6} {view['labelPx']:>9.1f}"
              + (f"  {dagre_ms(chromium, library, body_top(data), folder)} | "
                 f"{dagre_ms(chromium, library, flat(data), folder)}" if library else ""), flush=True)
    print(f"pages and screenshots in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
