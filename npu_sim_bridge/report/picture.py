"""The standalone HTML picture of a rewritten graph: name scopes that open and close, GeOps as boxes (no network).

The page groups nodes by name scope; each GeOp is a box holding its body's scopes. A graph with GeOps
opens on the body of its largest GeOp (the model's layers, down to their ops, at a readable zoom);
one without opens its largest groups while the picture fits. A click opens or closes a group. The
layout is layered from top to bottom (picture_layout.js); edges between two boxes are bundled into
one arrow routed through the gaps of the rows it crosses. Fill: list colour (white, black, gray;
light blue for ops with no list), or the estimated time per step when the rows carry "npu_us"
(with "npu_unit"). Border: device (green) or host (orange). Search ranks exact names first; a node
a fusion removed finds its fused op (data["fused"]). Fragments: `page.html#q=NAME` opens at a node,
`#colour=time` in the time colours, `#expand=all` with every group open. The page records what its
first view shows in <body data-view> (testing/browser.view_state reads it).
"""

from __future__ import annotations

import html
import json
from importlib import resources

# The page's script, in this order, inside one function scope (picture.html): each file uses the names before it.
SCRIPTS = ("picture_layout.js", "picture_draw.js", "picture_legend.js", "picture.js")


def render_html(data: dict) -> str:
    """The page for views.picture_data() output."""
    folder = resources.files("npu_sim_bridge.report")
    template = folder.joinpath("picture.html").read_text(encoding="utf-8")
    script = "\n".join(folder.joinpath(name).read_text(encoding="utf-8") for name in SCRIPTS)
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (template.replace("__TITLE__", html.escape(str(data.get("graph", "graph"))))
            .replace("__SCRIPT__", script).replace("__DATA__", payload))


def fused_away(report, drawn: set[str]) -> dict[str, str]:
    """name -> the drawn node that runs it, for each node of the report a fusion removed (its reasons
    `fusion.fused_into` the root, and `fusion.runs_inside` a target when the root was fused again):
    what search lands on."""
    if report is None:
        return {}
    found = {}
    for name in report.nodes:
        if name in drawn:
            continue
        reasons = report.nodes[name].reasons
        target = (next((r.get("target") for r in reasons if r.code == "fusion.runs_inside"), None)
                  or next((r.get("root") for r in reasons if r.code == "fusion.fused_into"), None))
        if target in drawn:
            found[name] = target
    return found
