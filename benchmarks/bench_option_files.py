"""Reading option files of growing size: modify_mixlist and fusion_switch_file with N unknown names.

    python benchmarks/bench_option_files.py [--sizes 1000,5000,20000,100000]

Prints, side by side for each N, the seconds the lists (precision) and the switch (fusion) take to
read and check a file naming N op or rule names nobody knows, the file's size, and the time per
name. Time per name that stays flat as N grows is linear reading; each file also gets 21 warnings
whatever N is (20 named, then one count).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings

os.environ.setdefault("NPU_SIM_SKIP_NATIVE", "1")  # reading files needs no Session
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from npu_sim_bridge.ops_info import load_library  # noqa: E402
from npu_sim_bridge.passes.fusion import describe_rules  # noqa: E402
from npu_sim_bridge.passes.precision.lists import build_lists  # noqa: E402


def _timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000,100000", help="names per file, comma-separated")
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    library = load_library()
    warnings.simplefilter("ignore")
    print(f"{'names':>8} {'bytes':>10} {'mixlist s':>10} {'us/name':>8} {'switch s':>10} {'us/name':>8} warnings")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            names = [f"NoSuchOp{i}" for i in range(size)]
            mixlist = os.path.join(folder, f"mixlist_{size}.json")
            switch = os.path.join(folder, f"switch_{size}.json")
            with open(mixlist, "w", encoding="utf-8") as handle:
                json.dump({"black-list": {"to-add": names}}, handle)
            with open(switch, "w", encoding="utf-8") as handle:
                json.dump({"Switch": {"GraphFusion": {name: "off" for name in names}}}, handle)
            mix_s, lists = _timed(build_lists, library, mixlist)
            switch_s, (_, switch_warnings) = _timed(describe_rules, switch)
            print(f"{size:>8} {os.path.getsize(mixlist):>10} {mix_s:>10.3f} {mix_s / size * 1e6:>8.1f} "
                  f"{switch_s:>10.3f} {switch_s / size * 1e6:>8.1f} {len(lists.warnings)}/{len(switch_warnings)}")


if __name__ == "__main__":
    main()
