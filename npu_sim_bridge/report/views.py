"""The views of a rewritten graph written next to its report: the graphs (.pbtxt), a TensorBoard run, a picture.

For a report with base path DIR/<graph id>:
  <graph id>.before.pbtxt, <graph id>.after.pbtxt   the GraphDef the pipeline got and the one it returned
  tensorboard/<graph id>/ and tensorboard/<graph id>_before/   events files: `tensorboard --logdir DIR/tensorboard`
                     (the rewritten graph with GeOp bodies inlined, device and segment set: report/tensorboard.py)
  <graph id>.html    a standalone picture (no network, report/picture.py): name scopes that open and close,
                     each GeOp a box holding its body, coloured by list (white/black/gray), host/device and GeOp
"""

from __future__ import annotations

import collections
import os
import re
import socket
import time

from npu_sim_bridge.graph.attr_names import GEOP_ATTR

HIDDEN_SCOPE = "npu_sim_dump/"  # dump instrumentation: not drawn


def write_views(base: str, report, before, after) -> list[str]:
    """Write the views of one rewritten graph; returns the paths written."""
    written = []
    for suffix, graph_def in (("before", before), ("after", after)):
        path = f"{base}.{suffix}.pbtxt"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(str(graph_def))  # text format; str() is the native encoder, ~7x text_format's speed
        written.append(path)
    directory, graph_id = os.path.split(base)
    from npu_sim_bridge.report.tensorboard import tensorboard_graph

    # GeOp bodies inlined under their GeOp's scope, with device and segment, so TensorBoard colours them.
    written.append(write_events(os.path.join(directory, "tensorboard", graph_id),
                                tensorboard_graph(after, hidden_scope=HIDDEN_SCOPE)))
    written.append(write_events(os.path.join(directory, "tensorboard", graph_id + "_before"), before))
    from npu_sim_bridge.report.picture import render_html

    path = f"{base}.html"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_html(picture_data(report, after)))
    written.append(path)
    return written


def write_events(logdir: str, graph_def) -> str:
    """An events file holding `graph_def`, so `tensorboard --logdir` shows it in its Graphs tab."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    os.makedirs(logdir, exist_ok=True)
    now = time.time()
    path = os.path.join(logdir, f"events.out.tfevents.{int(now)}.{socket.gethostname()}.npu_sim")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(event_pb2.Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
        writer.write(event_pb2.Event(wall_time=now, step=0, graph_def=graph_def.SerializeToString())
                     .SerializeToString())
    return path


def display_graph(graph_def) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, bool]]]:
    """The rewritten graph with each GeOp's body drawn in place of its call.

    Returns nodes (key, name, op, GeOp or "") and edges (producer key, consumer key, is_control). A body
    node's key is "<GeOp>\x1f<name>", so it stays apart from the top-level node that keeps its name for the
    caller (the fetched-name twin of a GeOp output): that twin is drawn with an edge from the body node,
    never as a self-loop.
    """
    functions = {f.signature.name: f for f in graph_def.library.function}
    geops = {node.name: functions.get(node.attr["f"].func.name) for node in graph_def.node
             if GEOP_ATTR in node.attr and "f" in node.attr}
    nodes = []
    outputs = {}   # (geop, output index) -> body node key
    for node in graph_def.node:
        body = geops.get(node.name)
        if body is None:
            nodes.append((node.name, node.name, node.op, ""))
            continue
        for index, arg in enumerate(body.signature.output_arg):
            outputs[(node.name, index)] = body_key(node.name, body.ret[arg.name].split(":")[0])
        nodes.extend((body_key(node.name, member.name), member.name, member.op, node.name)
                     for member in body.node_def if not member.name.startswith(HIDDEN_SCOPE))
    calls = {node.name: node for node in graph_def.node}

    def source(text: str) -> str:
        name, _, port = text.lstrip("^").partition(":")
        if name in geops and geops[name] is not None:
            return outputs.get((name, int(port) if port.isdigit() else 0), name)
        return name

    edges = []
    for node in graph_def.node:
        body = geops.get(node.name)
        if body is None:
            edges.extend((source(text), node.name, text.startswith("^")) for text in node.input)
            continue
        args = {arg.name: index for index, arg in enumerate(body.signature.input_arg)}
        call_inputs = [text for text in calls[node.name].input if not text.startswith("^")]
        for member in body.node_def:
            if member.name.startswith(HIDDEN_SCOPE):
                continue
            for text in member.input:
                name = text.lstrip("^").split(":")[0]
                if name in args:
                    index = args[name]
                    if index < len(call_inputs):
                        edges.append((source(call_inputs[index]), body_key(node.name, member.name), False))
                else:
                    edges.append((body_key(node.name, name), body_key(node.name, member.name),
                                  text.startswith("^")))
    return nodes, edges


def drawn_counts(graph_def, calls=None) -> tuple[int, int, int]:
    """(GeOps drawn with their body, nodes drawn inside those bodies, nodes drawn outside them): what
    display_graph draws, counted without drawing (the report's counts and the picture's totals agree).
    `calls`: the graph's nodes whose op is one of CALL_OPS (a GeOp's call is one), when the caller knows
    them without reading every NodeDef; by default every node is looked at."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    geops = inside = 0
    for node in graph_def.node if calls is None else calls:
        if GEOP_ATTR in node.attr and "f" in node.attr:
            body = functions.get(node.attr["f"].func.name)
            if body is not None:
                geops += 1
                inside += sum(1 for member in body.node_def if not member.name.startswith(HIDDEN_SCOPE))
    return geops, inside, len(graph_def.node) - geops


def body_key(geop: str, name: str) -> str:
    return f"{geop}\x1f{name}"


def picture_data(report, graph_def) -> dict:
    """What the page draws: nodes with their decisions, the name-scope groups (GeOps first), edges, totals,
    and the nodes fusions removed (name -> the fused node that runs it)."""
    from npu_sim_bridge.report.picture import fused_away

    nodes, edges = display_graph(graph_def)
    index = {key: position for position, (key, _, _, _) in enumerate(nodes)}
    links = sorted({(index[a], index[b], control) for a, b, control in edges
                    if a in index and b in index and index[a] != index[b]})
    geops = sorted({geop for _, _, _, geop in nodes if geop}, key=_natural)
    groups: list[dict] = []
    group_index: dict[tuple, int] = {}

    def group(path: tuple) -> int:
        if not path:
            return -1
        found = group_index.get(path)
        if found is None:
            parent = group(path[:-1])
            is_geop = len(path) == 1 and path[0].startswith("\x1f")
            label = path[-1].lstrip("\x1f")
            groups.append({"k": label, "n": "/".join(part.lstrip("\x1f") for part in path), "p": parent,
                           "g": geops.index(label) if is_geop else -1})
            found = group_index[path] = len(groups) - 1
        return found

    in_bodies = {name: geop for _, name, _, geop in nodes if geop}
    estimates = report.estimate["nodes"] if report is not None and getattr(report, "estimate", None) else None
    rows = []
    for key, name, op, geop in nodes:
        decision = report.nodes.get(name) if report is not None else None
        placement = "device" if geop else (decision.placement if decision and decision.placement else "")
        twin = not geop and name in in_bodies
        if twin:  # the top-level node that keeps a GeOp body node's name (fetched or preserved) for the caller
            decision, placement = None, "host"
        prefix = ("\x1f" + geop,) if geop else ()
        rows.append({
            "n": name, "o": op, "s": group(prefix + tuple(name.split("/")[:-1])),
            "l": (decision.list if decision else None) or "",
            "p": placement, "g": geops.index(geop) if geop else -1,
            "d": _dtype(decision),
            "r": (f"keeps the name of {name} (in {in_bodies[name]}) for the caller" if twin
                  else decision.reason if decision else ""),
        })
        if estimates is not None:  # the picture offers its "estimated time" colours
            rows[-1]["npu_unit"], rows[-1]["npu_us"] = estimates.get(name, (None, None))
    counts = collections.Counter(row["l"] or "none" for row in rows)
    return {
        "graph": report.graph_id if report is not None else "graph",
        "nodes": rows, "groups": groups, "edges": [[a, b, 1 if control else 0] for a, b, control in links],
        "geops": geops,
        "fused": fused_away(report, {row["n"] for row in rows}),
        "totals": {"nodes": len(rows), "edges": len(links), "groups": len(groups), "lists": dict(counts),
                   "placements": dict(collections.Counter(row["p"] or "-" for row in rows))},
        "warnings": list(report.warnings) if report is not None else [],
        # The report's own counts (report/counts.py), which the text and JSON report give too.
        "counts": dict(report.counts or {}) if report is not None else {},
    }


def _natural(name: str) -> list:
    """GeOp1_2 before GeOp1_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _dtype(decision) -> str:
    if decision is None or decision.dtype_before is None:
        return ""
    if decision.dtype_before == decision.dtype_after:
        return decision.dtype_before
    return f"{decision.dtype_before} -> {decision.dtype_after}"
