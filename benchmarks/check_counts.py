"""Node counts across the text report, JSON report and HTML picture, over the whole model sweep.

Each model is rewritten offline with allow_mix_precision and its report written; the three files are read back
and every count compared (npu_sim_bridge.testing.counts). Prints one row per model and exits 1 on any
disagreement. tests/test_report_summary.py runs the same check on two small models.

Run:  .venv/bin/python benchmarks/check_counts.py [--models NAME ...]
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import npu_sim_bridge  # noqa: E402
from npu_sim_bridge.testing import counts, zoo  # noqa: E402


def main() -> int:
    builders = zoo.sweep_builders()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help=f"models to check (default all): {', '.join(builders)}")
    args = parser.parse_args()
    unknown = sorted(set(args.models or ()) - set(builders))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(builders)}")
    print(f"{'model':<22} {'input':>7} {'records':>8} {'GeOps':>6} {'inside':>7} {'host':>6} {'drawn':>7}  agree")
    failed = 0
    for name in args.models or builders:
        model = builders[name]()
        with tempfile.TemporaryDirectory() as folder:
            result = npu_sim_bridge.rewrite(model.meta_graph_def(), {"precision_mode": "allow_mix_precision",
                                                                     "sim_report_dir": folder},
                                            fetches=model.fetch_names())
            problems = counts.disagreements(result, folder)
        figures = result.report.to_dict()["summary"]["counts"]
        failed += bool(problems)
        print(f"{name:<22} {figures['input_nodes']:>7} {figures['decision_records']:>8} {figures['geops']:>6} "
              f"{figures['inside_geops']:>7} {figures['outside_geops']:>6} {figures['drawn']:>7}  "
              + ("yes" if not problems else "NO: " + "; ".join(problems)), flush=True)
    print(f"{failed} of {len(args.models or builders)} models disagree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
