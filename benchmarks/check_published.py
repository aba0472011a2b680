"""Whether a change keeps what a rewrite publishes: the files of the report folder and of DUMP_GE_GRAPH, before/after.

Each model (testing/models.py small sizes: resnet50, bert, lstm; testing/zoo.py: tf1_batchnorm_cnn, keras_cnn,
user_cond_mlp) is rewritten with the offline API (the model's training fetches) under the option sets default,
mix (allow_mix_precision) and fp16 (force_fp16 with mix_compile_mode), with sim_report_dir set and DUMP_GE_GRAPH=1,
DUMP_GRAPH_LEVEL=1, into OUT/<model>.<set>/{graph.pb, report/, dump/}.

    python benchmarks/check_published.py --out /tmp/after                       # this tree
    PYTHONPATH=/path/to/old/tree python benchmarks/check_published.py --out /tmp/before
    python benchmarks/check_published.py --compare /tmp/before /tmp/after

The comparison prints, per model and option set, whether the rewritten graph, the JSON report, the .pbtxt
graphs, the picture's data and the DUMP_GE_GRAPH files are identical, leaving out what names or times the
run: the graph id (the file names), the summary's role, counts and timings, sim_report_dir itself, and the
picture's "counts" and "fused" keys (older trees lack them). Exit status 1 when anything else differs.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

OPTION_SETS = {"default": {}, "mix": {"precision_mode": "allow_mix_precision"},
               "fp16": {"precision_mode": "force_fp16", "mix_compile_mode": True}}
_SUMMARY_LEFT_OUT = ("graph", "role", "role_reason", "counts", "seconds", "passes")


def write(out: str) -> None:
    import npu_sim_bridge
    from npu_sim_bridge.testing import models, zoo

    builders = {f"zoo.{name}": getattr(zoo, name) for name in ("tf1_batchnorm_cnn", "keras_cnn", "user_cond_mlp")}
    builders.update({f"models.{name}": build for name, build in models.small_builders().items()
                     if name in ("resnet50", "bert", "lstm")})
    for model_name, build in builders.items():
        model = build()
        for set_name, options in OPTION_SETS.items():
            folder = os.path.join(out, f"{model_name}.{set_name}")
            os.makedirs(os.path.join(folder, "dump"), exist_ok=True)
            os.environ.update(DUMP_GE_GRAPH="1", DUMP_GRAPH_LEVEL="1", DUMP_GRAPH_PATH=os.path.join(folder, "dump"))
            result = npu_sim_bridge.rewrite(model.meta_graph_def(),
                                            dict(options, sim_report_dir=os.path.join(folder, "report")),
                                            fetches=model.fetch_names())
            with open(os.path.join(folder, "graph.pb"), "wb") as handle:
                handle.write(result.graph_def.SerializeToString(deterministic=True))
            print(model_name, set_name, result.report.graph_id, flush=True)


def _report(path: str) -> dict:
    data = json.load(open(path, encoding="utf-8"))
    for key in _SUMMARY_LEFT_OUT:
        data["summary"].pop(key, None)
    data["options"].pop("sim_report_dir", None)
    data["option_notes"] = [note for note in data["option_notes"] if note["name"] != "sim_report_dir"]
    return data


def _picture(path: str) -> dict:
    page = open(path, encoding="utf-8").read()
    data = json.JSONDecoder().raw_decode(page[page.index('{"graph"'):])[0]
    for key in ("graph", "counts", "fused"):
        data.pop(key, None)
    return data


def _dumps(folder: str) -> dict:
    # ge_proto_<seq>_graph_<graph id>_<Stage>.txt: the stage (or GeOp body) without the sequence and graph id
    strip = re.compile(r"^ge_proto_\d+_graph_\d+_[A-Za-z0-9_.-]+?_(?=[A-Z])")
    return {strip.sub("", os.path.basename(path)): open(path, encoding="utf-8").read()
            for path in glob.glob(os.path.join(folder, "dump", "*.txt"))}


def _one(folder: str, pattern: str) -> str:
    found = glob.glob(os.path.join(folder, "report", pattern))
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one report/{pattern}, found {len(found)}")
    return found[0]


def compare(before: str, after: str) -> int:
    differing = 0
    names = sorted(os.listdir(before))
    for name in names:
        a, b = os.path.join(before, name), os.path.join(after, name)
        checks = {
            "graph": open(os.path.join(a, "graph.pb"), "rb").read() == open(os.path.join(b, "graph.pb"), "rb").read(),
            "report_json": _report(_one(a, "*.json")) == _report(_one(b, "*.json")),
            "pbtxt": all(open(_one(a, f"*.{side}.pbtxt")).read() == open(_one(b, f"*.{side}.pbtxt")).read()
                         for side in ("before", "after")),
            "picture_data": _picture(_one(a, "*.html")) == _picture(_one(b, "*.html")),
            "ge_dumps": _dumps(a) == _dumps(b) and bool(_dumps(a)),
        }
        differing += not all(checks.values())
        print(f"{name:32s} " + " ".join(f"{key}={'same' if same else 'DIFFERS'}" for key, same in checks.items()))
    print(f"{len(names) - differing}/{len(names)} identical")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write this tree's files there")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --out folders")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("give --out DIR or --compare BEFORE AFTER")
    write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
