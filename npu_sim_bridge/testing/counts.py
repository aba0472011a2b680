"""Whether one rewrite's node counts agree across its text report, JSON report and HTML picture.

The report names each count (report/counts.py); this reads the three files back as a user would and lists
every figure that disagrees. tests/test_report_summary.py runs it on two small models,
benchmarks/check_counts.py on the whole model sweep.
"""

from __future__ import annotations

import json
import os
import re

TEXT = re.compile(r"nodes: (\d+) in the input graph; (\d+) in the rewritten graph \((\d+) GeOps \+ (\d+) host ops "
                  r"outside them\), (\d+) inside the GeOps; (\d+) drawn in the picture\n"
                  r"  decision records: (\d+) \((\d+) input nodes \+ (\d+) the passes added")
TEXT_KEYS = ("input_nodes", "output_nodes", "geops", "outside_geops", "inside_geops", "drawn", "decision_records",
             "input_nodes", "added_by_passes")


def picture_data(path: str) -> dict:
    """The data the HTML picture embeds (its JSON object, read from the page)."""
    with open(path, encoding="utf-8") as handle:
        page = handle.read()
    return json.JSONDecoder().raw_decode(page[page.index('{"graph"'):])[0]


def _pairs(line: str) -> dict:
    return {key: int(value) for key, value in (part.strip().rsplit(" ", 1) for part in line.split(",") if part.strip())}


def disagreements(result, folder: str) -> list[str]:
    """Each count of `result` (an npu_sim_bridge.rewrite result whose report went to `folder`) that the text,
    JSON and picture do not give alike, or that does not match the graphs themselves; [] when all agree."""
    base = os.path.join(folder, result.report.graph_id)
    with open(base + ".json", encoding="utf-8") as handle:
        data = json.load(handle)
    with open(base + ".txt", encoding="utf-8") as handle:
        text = handle.read()
    picture = picture_data(base + ".html")
    counts = data["summary"]["counts"]
    found = []

    def check(what, seen, expected):
        if seen != expected:
            found.append(f"{what}: {seen} != {expected}")

    figures = TEXT.search(text)
    if not figures:
        return ["text report: no counts line"]
    check("text counts", [int(value) for value in figures.groups()], [counts[key] for key in TEXT_KEYS])
    check("picture counts", picture["counts"], counts)
    check("picture nodes drawn", [picture["totals"]["nodes"], len(picture["nodes"])], [counts["drawn"]] * 2)
    check("JSON rows", len(data["nodes"]), counts["decision_records"])
    check("rewritten graph nodes", [len(result.graph_def.node), counts["geops"] + counts["outside_geops"]],
          [counts["output_nodes"]] * 2)
    check("input graph nodes", len(result.graph_as_it_came().node), counts["input_nodes"])
    check("GeOps listed", len(data["summary"]["geops"]), counts["geops"])
    check("picture nodes inside GeOps", sum(1 for row in picture["nodes"] if row["g"] >= 0), counts["inside_geops"])
    by_placement = re.search(r"^  records by placement: ([^(\n]*?)(?: \((\d+) records without one[^)\n]*\))?$", text,
                             re.M)
    unplaced = sum(1 for row in data["nodes"] if not row["placement"])
    if by_placement:
        check("placements, text vs JSON", _pairs(by_placement.group(1)), data["summary"]["placements"])
        check("records without a placement", int(by_placement.group(2) or 0), unplaced)
    check("records = placed + unplaced", counts["decision_records"],
          sum(data["summary"]["placements"].values()) + unplaced)
    by_list = re.search(r"records by list: (.*)", text)
    check("lists, text vs JSON", _pairs(by_list.group(1)) if by_list else {}, data["summary"]["lists"])
    return found


__all__ = ["TEXT", "TEXT_KEYS", "disagreements", "picture_data"]
