"""Whether a change to the rewrite keeps its output: digests of every rewritten graph and report of the model
sweep and the zoo, under three option sets, and a comparison of two such digest files.

Each model (testing/models.py at small sizes, testing/zoo.py's sweep) is rewritten with the offline API
(`npu_sim_bridge.rewrite`, the model's training fetches) under

    default   the default options (precision_mode allow_fp32_to_fp16)
    mix       allow_mix_precision with a modify_mixlist file (Relu to the black list, Mul to the white list)
    fp16      force_fp16 with mix_compile_mode on (must_keep_origin_dtype refuses the CNNs' float32 convolutions)

and the script writes, per (model, option set): the SHA-256 of the rewritten GraphDef's deterministic
serialization, the SHA-256 of the report's JSON without its run-time fields (pass and pipeline seconds),
the report's decision columns (name, op, list, dtypes, placement, GeOp, the reason text people read) as a
digest, and the report itself, for the comparison to show what else differs.

Per model of the sweep (zoo.*) it also trains the model as testing/sweep.py does (the same start values
and batches in every run) in the float32 runs plain, pp_full and pp_mix and in the allow_mix_precision
run mixed, and writes the loss before each of the training steps and after the last as exact float hex
strings (key `<model>/float32`): the comparison then shows whether the numbers are bit-identical too.
`--parts rewrite` or `--parts float32` writes only one of the two.

    python benchmarks/check_identical.py --out /tmp/after.json                 # digests of this tree
    PYTHONPATH=/path/to/old/tree python benchmarks/check_identical.py --out /tmp/before.json
    python benchmarks/check_identical.py --compare /tmp/before.json /tmp/after.json

The comparison fails (exit status 1) when a graph digest or a decision column differs, the reason text
included (worked out again from both sides' reports, so a digest file of an older tree compares too). The
reason codes are reported, not failed on: how many nodes' codes differ, and which codes one side has and
the other not, with their counts (a change that gives a family of reasons codes shows them here). Any
other report difference (counts, file names, optional per-node keys) is printed, not failed on. A case
whose input graph differs between the two files (its builder gave each process another graph, as Keras
does for MobileNetV3Small's VarIsInitializedOp inputs) is named NOT COMPARED and counted apart: its
rewrites cannot say whether the change kept the output.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DECISION_KEYS = ("name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason")
OPTION_SETS = ("default", "mix", "fp16")
PARTS = ("rewrite", "float32")
FLOAT32_RUNS = ("plain", "pp_full", "pp_mix", "mixed")  # sweep.py's float32 runs and its mixed-precision run
FLOAT32_STEPS = 3


def option_set(name: str, folder: str) -> dict:
    if name == "default":
        return {}
    if name == "mix":
        mixlist = os.path.join(folder, "mixlist.json")
        with open(mixlist, "w", encoding="utf-8") as handle:
            json.dump({"black-list": {"to-add": ["Relu"]}, "white-list": {"to-add": ["Mul"]}}, handle)
        return {"precision_mode": "allow_mix_precision", "modify_mixlist": mixlist}
    if name == "fp16":
        return {"precision_mode": "force_fp16", "mix_compile_mode": True}
    raise SystemExit(f"unknown option set {name!r}: use one of {', '.join(OPTION_SETS)}")


def builders(only: list[str] | None) -> dict:
    from npu_sim_bridge.testing import models, zoo

    found = {f"models.{name}": builder for name, builder in models.small_builders().items()}
    found.update({f"zoo.{name}": builder for name, builder in zoo.sweep_builders().items()})
    if only:
        unknown = sorted(set(only) - set(found))
        if unknown:
            raise SystemExit(f"unknown model(s) {', '.join(unknown)}: choose from {', '.join(sorted(found))}")
        found = {name: found[name] for name in only}
    return found


def without_run_time(report: dict) -> dict:
    """The report's JSON form less the fields that measure this run (seconds), which differ between runs."""
    summary = dict(report.get("summary", {}))
    summary.pop("seconds", None)
    summary["passes"] = [{key: value for key, value in record.items() if key != "seconds"}
                         for record in summary.get("passes", [])]
    return {**report, "summary": summary}


def decision_rows(report: dict) -> list:
    """The decision columns of each node, its reason text included: what the comparison requires to be identical."""
    return [[node.get(key) for key in DECISION_KEYS] for node in report.get("nodes", [])]


def reason_codes(report: dict) -> list:
    """Per node, the codes of its structured reasons (nested ones, a wrapped cause, not counted)."""
    return [[reason.get("code") for reason in node.get("reasons", [])] for node in report.get("nodes", [])]


def code_changes(before: dict, after: dict) -> tuple[int, dict, dict]:
    """(nodes whose reason codes differ, {code: count} only after, {code: count} only before)."""
    left, right = reason_codes(before), reason_codes(after)
    differ = sum(a != b for a, b in zip(left, right)) + abs(len(left) - len(right))
    count_left = collections.Counter(code for codes in left for code in codes)
    count_right = collections.Counter(code for codes in right for code in codes)
    gained = {code: n for code, n in sorted(count_right.items()) if code not in count_left}
    lost = {code: n for code, n in sorted(count_left.items()) if code not in count_right}
    return differ, gained, lost


def decision_changes(before: list, after: list) -> list[str]:
    """Which nodes' decisions differ, by node name: counts by op and changed column, nodes only one side
    has by op, and the first changed node's two rows."""
    name, op = DECISION_KEYS.index("name"), DECISION_KEYS.index("op")
    left, right = {row[name]: row for row in before}, {row[name]: row for row in after}
    changed = collections.Counter()
    example = None
    for node in left.keys() & right.keys():
        a, b = left[node], right[node]
        if a != b:
            columns = "/".join(key for key, x, y in zip(DECISION_KEYS, a, b) if x != y)
            changed[f"{b[op]} ({columns})"] += 1
            example = example or (a, b)
    lines = []
    if changed:
        lines.append("changed nodes by op (columns): " + ", ".join(f"{k} x{n}" for k, n in changed.most_common()))
    for label, only, side in (("only before", left.keys() - right.keys(), left),
                              ("only after", right.keys() - left.keys(), right)):
        if only:
            counts = collections.Counter(side[node][op] for node in only)
            lines.append(f"nodes {label} by op: " + ", ".join(f"{k} x{n}" for k, n in counts.most_common()))
    if example:
        lines.append(f"e.g. {json.dumps(example[0])[:160]}\n      -> {json.dumps(example[1])[:160]}")
    if not lines:
        lines.append("the same rows in another order")
    return lines


def op_changes(before: dict, after: dict, limit: int = 16) -> str:
    """The op counts that differ, as `op +n` / `op -n`; "none" when only attributes or edges differ."""
    deltas = [f"{op} {after.get(op, 0) - before.get(op, 0):+d}" for op in sorted(set(before) | set(after))
              if after.get(op, 0) != before.get(op, 0)]
    shown = ", ".join(deltas[:limit]) + (f", and {len(deltas) - limit} more" if len(deltas) > limit else "")
    return shown or "none (values or edges)"


def attr_counts(graph_def) -> dict:
    """{"<op>.<attr>": nodes with that attribute} over the graph and its functions, and {"<op>.<attr>=<digest>"}
    per distinct value: a graph whose ops are the same then shows which attributes changed."""
    counts: collections.Counter = collections.Counter()
    nodes = list(graph_def.node) + [node for function in graph_def.library.function for node in function.node_def]
    for node in nodes:
        for attr, value in node.attr.items():
            counts[f"{node.op}.{attr}"] += 1
            counts[f"{node.op}.{attr}={sha(value.SerializeToString(deterministic=True))[:8]}"] += 1
    counts["functions"] = len(graph_def.library.function)
    return dict(counts)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reset_counters() -> None:
    """Number graphs and GeOps from 1 again, as in a fresh process: a digest then depends on its model and
    options only, not on the rewrites run before it."""
    for name, module in list(sys.modules.items()):
        if name.startswith("npu_sim_bridge."):
            for attr in ("_graph_counter", "_graph_numbers"):
                if isinstance(getattr(module, attr, None), itertools.count):
                    setattr(module, attr, itertools.count(1))


def digest_one(builder, options: dict) -> dict:
    import tensorflow as tf

    from npu_sim_bridge import rewrite

    model = builder()
    source = model.graph_def()
    reset_counters()
    graph_def, report = rewrite(source, options, fetches=model.fetch_names())
    tf.compat.v1.reset_default_graph()
    report_dict = without_run_time(json.loads(report.to_json()))
    rows = decision_rows(report_dict)
    return {
        # The graph the builder gave: a builder that gives another one in another process (Keras lists some
        # nodes' inputs in an order that changes) makes its rewrites incomparable, not different.
        "input": sha(source.SerializeToString(deterministic=True)),
        "graph": sha(graph_def.SerializeToString(deterministic=True)),
        "report": sha(json.dumps(report_dict, sort_keys=True).encode()),
        "decisions": sha(json.dumps(rows).encode()),
        "nodes": len(graph_def.node),
        "ops": dict(collections.Counter(node.op for node in graph_def.node)),
        "function_ops": dict(collections.Counter(node.op for function in graph_def.library.function
                                                 for node in function.node_def)),
        "attrs": attr_counts(graph_def),
        "report_json": report_dict,
    }


def float32_losses(name: str, builder) -> dict:
    """{run: [loss before each training step and after the last, as float.hex]} of the sweep's runs."""
    from npu_sim_bridge.testing import sweep

    reset_counters()
    row = sweep.measure(name, builder, steps=FLOAT32_STEPS, runs=FLOAT32_RUNS)
    return {"losses": {run: [float(value).hex() for value in row.histories[run]] for run in FLOAT32_RUNS}}


def compare_losses(key: str, before: dict, after: dict) -> bool:
    """Print whether two sides' loss histories are bit-identical, and the first step that differs."""
    differing = [run for run in sorted(set(before) | set(after)) if before.get(run) != after.get(run)]
    print(f"{key:40s} losses {'same' if not differing else 'DIFFER'} "
          f"({len(set(before) | set(after))} runs x {max(map(len, list(before.values()) or [[]]))} values)")
    for run in differing:
        left, right = before.get(run) or [], after.get(run) or []
        step = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
        show = [float.fromhex(v) if v else None for v in (left[step:step + 1] + right[step:step + 1])]
        print(f"    {run}: first differs at value {step}: {show}")
    return not differing


def write_digests(out: str, only: list[str] | None, sets: list[str], parts=PARTS) -> None:
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    digests = {}
    # One folder name on both sides: the report names the modify_mixlist file.
    folder = os.path.join(tempfile.gettempdir(), f"check_identical_{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    began_all = time.perf_counter()
    for model, builder in builders(only).items():
        jobs = [(set_name, lambda s=set_name: digest_one(builder, option_set(s, folder)))
                for set_name in sets if "rewrite" in parts]
        if "float32" in parts and model.startswith("zoo."):
            jobs.append(("float32", lambda: float32_losses(model.split(".", 1)[1], builder)))
        for label, job in jobs:
            began = time.perf_counter()
            key = f"{model}/{label}"
            try:
                digests[key] = job()
            except Exception as err:  # recorded: the comparison then shows the two sides' errors
                digests[key] = {"error": f"{type(err).__name__}: {err}"}
            entry = digests[key]
            shown = entry.get("graph") or entry.get("error") or " ".join(entry["losses"]["plain"][-1:])
            print(f"{key:40s} {shown[:24]:24s} {time.perf_counter() - began:6.1f} s", flush=True)
            with open(out + ".partial", "w", encoding="utf-8") as handle:  # after each: a sweep cut short counts
                json.dump(digests, handle)
            os.replace(out + ".partial", out)  # whole, for a comparison that reads it meanwhile
    print(f"wrote {len(digests)} digests to {out} in {time.perf_counter() - began_all:.0f} s")


def _differences(before, after, path="", limit=8) -> list[str]:
    """Paths where two JSON values differ (at most `limit`)."""
    found: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            if key not in before or key not in after:
                found.append(f"{path}/{key}: {'added' if key not in before else 'removed'}")
            else:
                found += _differences(before[key], after[key], f"{path}/{key}", limit - len(found))
            if len(found) >= limit:
                break
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (left, right) in enumerate(zip(before, after)):
            found += _differences(left, right, f"{path}[{index}]", limit - len(found))
            if len(found) >= limit:
                break
    elif before != after:
        found.append(f"{path}: {json.dumps(before)[:80]} -> {json.dumps(after)[:80]}")
    return found[:limit]


def load(paths: str) -> dict:
    """The digests of one or more files (comma-separated: parts of one side run separately), merged."""
    merged: dict = {}
    for path in paths.split(","):
        with open(path, encoding="utf-8") as handle:
            merged.update(json.load(handle))
    return merged


def compare(before_path: str, after_path: str, only_common: bool = False) -> int:
    before, after = load(before_path), load(after_path)
    if only_common:
        common = before.keys() & after.keys()
        print(f"comparing the {len(common)} cases both sides have ({len(before)} before, {len(after)} after)")
        before = {key: before[key] for key in common}
        after = {key: after[key] for key in common}
    failed = incomparable = 0
    for key in sorted(set(before) | set(after)):
        left, right = before.get(key), after.get(key)
        if left is None or right is None:
            print(f"{key:40s} only in {'after' if left is None else 'before'}")
            failed += 1
            continue
        if "error" in left or "error" in right:
            same = left.get("error") == right.get("error")
            print(f"{key:40s} {'same error' if same else 'ERROR DIFFERS'}: {right.get('error') or left.get('error')}")
            failed += not same
            continue
        if "losses" in left or "losses" in right:
            failed += not compare_losses(key, left.get("losses", {}), right.get("losses", {}))
            continue
        inputs = (left.get("input"), right.get("input"))  # a file of an older run has none
        if None not in inputs and inputs[0] != inputs[1]:
            print(f"{key:40s} NOT COMPARED: the model's builder gave each side another input graph, so the two "
                  "rewrites say nothing about the change")
            incomparable += 1
            continue
        graph = left["graph"] == right["graph"]
        rows_left, rows_right = decision_rows(left["report_json"]), decision_rows(right["report_json"])
        decisions = rows_left == rows_right
        report = left["report"] == right["report"]
        differ, gained, lost = code_changes(left["report_json"], right["report_json"])
        print(f"{key:40s} graph {'same' if graph else 'DIFFERS'}   decisions {'same' if decisions else 'DIFFER'}"
              f"   report {'same' if report else 'differs'}   reason codes of {differ} nodes differ")
        if not (graph and decisions):
            failed += 1
        if not decisions:
            for line in decision_changes(rows_left, rows_right):
                print(f"    {line}")
        if not graph:
            for field in ("ops", "function_ops", "attrs"):
                if field in left and field in right:
                    print(f"    {field} of the rewritten graph, after - before: {op_changes(left[field], right[field])}")
        for label, codes in (("codes only after", gained), ("codes only before", lost)):
            if codes:
                print(f"    {label}: " + ", ".join(f"{code} ({n})" for code, n in codes.items()))
        if not report and not differ:
            for line in _differences(left["report_json"], right["report_json"]):
                print(f"    {line}")
    print(f"{len(set(before) | set(after)) - incomparable} compared, {failed} with a different graph, decisions or losses"
          + (f"; {incomparable} not compared: their input graphs differ" if incomparable else ""))
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the digests of this tree's rewrite to this JSON file")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="compare two digest files (each may be a comma-separated list of files, merged)")
    parser.add_argument("--common", action="store_true",
                        help="compare only the cases both sides have (a side run on fewer models)")
    parser.add_argument("--models", nargs="*", help="only these models (e.g. models.mlp zoo.keras_cnn)")
    parser.add_argument("--sets", nargs="*", default=list(OPTION_SETS), choices=OPTION_SETS,
                        help="only these option sets")
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS,
                        help="rewrite: graph and report digests; float32: the sweep models' training losses")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare, only_common=args.common)
    if not args.out:
        parser.error("give --out FILE (write digests) or --compare BEFORE AFTER")
    import npu_sim_bridge

    print(f"npu_sim_bridge from {os.path.dirname(npu_sim_bridge.__file__)}")
    write_digests(args.out, args.models, args.sets, args.parts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
