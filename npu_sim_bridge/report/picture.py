"""The standalone HTML picture of a rewritten graph: name scopes that open and close, GeOps as boxes (no network).

The page groups nodes by name scope; each GeOp is a box holding its body's scopes. It opens with as
many groups expanded as keep the picture readable (about 80 boxes), and a click opens or closes a
group. Edges between two boxes are bundled into one arrow whose width grows with the number of edges
it carries. The page lays out what is open (layered, left to right, each open group laid out inside
its frame), so even a 10k-node graph draws only what is on screen. Fill: list colour (white, black,
gray; light blue for ops with no list). Border: device (green) or host (orange). GeOp boxes and
frames carry the GeOp's colour. Search ranks exact names first; `page.html#q=NAME` opens at a node.
"""

from __future__ import annotations

import html
import json
from importlib import resources


def render_html(data: dict) -> str:
    """The page for views.picture_data() output."""
    template = resources.files("npu_sim_bridge.report").joinpath("picture.html").read_text(encoding="utf-8")
    script = resources.files("npu_sim_bridge.report").joinpath("picture.js").read_text(encoding="utf-8")
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (template.replace("__TITLE__", html.escape(str(data.get("graph", "graph"))))
            .replace("__SCRIPT__", script).replace("__DATA__", payload))
