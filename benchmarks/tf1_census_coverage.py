"""Which rows of the ModelZoo TF 1.15 census `npu-sim run` now provides, and the models that unblocks (an estimate).

    python benchmarks/tf1_census_coverage.py [--census-dir DIR] [--min-models 1] [--rows]

DIR holds the census files; by default $NPU_SIM_CENSUS_DIR, else the first of ../shared/reference and
../../shared/reference (next to the checkout, or next to the folder of worktrees) that has them.

Reads modelzoo_tf1_api_missing.csv (every path the census found missing, with its model count and
family) and resolves each row's path with `npu-sim check`'s resolver (the objects `npu-sim run`
gives a script). A family of the census's greedy table is covered when every TF 1.15 row of it
resolves. The CSV has no per-model lists, so the model figure is a lower bound built from the
census's own tables: the census baseline (models using only TF 1.15 names that resolved), plus
the greedy cumulative count of the longest run of covered steps, plus the "only blocker" counts of
covered families outside that run (a model whose single blocking family is covered is unblocked). A second, simpler bound: a model
still blocked uses at least one uncovered name, so models blocked <= the sum of the model counts of
the uncovered rows. Both bounds take the CSV's example path per name: a deeper part of another
model's chain through that name could still fail.
"""

import argparse
import collections
import csv
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CENSUS_CSV = "modelzoo_tf1_api_missing.csv"
CANDIDATE_DIRS = tuple(os.path.normpath(os.path.join(_CHECKOUT, *up, "shared", "reference"))
                       for up in (("..",), ("..", "..")))


def default_census_dir():
    """$NPU_SIM_CENSUS_DIR, else the first candidate folder holding the census CSV (else the first candidate)."""
    if os.environ.get("NPU_SIM_CENSUS_DIR"):
        return os.environ["NPU_SIM_CENSUS_DIR"]
    for candidate in CANDIDATE_DIRS:
        if os.path.isfile(os.path.join(candidate, CENSUS_CSV)):
            return candidate
    return CANDIDATE_DIRS[0]


def _table_after(text, heading, columns):
    """Rows (lists of cells) of the first markdown table after the line containing `heading`."""
    lines = text[text.index(heading):].splitlines()
    rows, started = [], False
    for line in lines[1:]:
        if line.startswith("|"):
            started = True
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) == columns and not set(cells[0]) <= {"-", ":"} and cells[0] not in ("step", "family"):
                rows.append(cells)
        elif started:
            break
    return rows


def _plain(family):
    return family.replace("`", "")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--census-dir", default=None,
                        help="folder with modelzoo_tf1_api_missing.csv and modelzoo_tf1_api_census.md")
    parser.add_argument("--min-models", type=int, default=1, help="list uncovered rows used by at least this many")
    parser.add_argument("--rows", action="store_true", help="also list every covered row")
    args = parser.parse_args(argv)

    from npu_sim_bridge.runtime.loss_scale import register_tf1_contrib
    from npu_sim_bridge.tf1compat.resolve import MISSING, resolve_tensorflow

    census_dir = args.census_dir or default_census_dir()
    csv_path = os.path.join(census_dir, CENSUS_CSV)
    if not os.path.isfile(csv_path):
        searched = args.census_dir or os.environ.get("NPU_SIM_CENSUS_DIR") or ", ".join(CANDIDATE_DIRS)
        print(f"tf1_census_coverage: no census file {csv_path} (looked in: {searched}); pass the folder that holds "
              f"{CENSUS_CSV} and modelzoo_tf1_api_census.md with --census-dir DIR, or set NPU_SIM_CENSUS_DIR",
              file=sys.stderr)
        return 2
    register_tf1_contrib()
    with open(csv_path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    with open(os.path.join(census_dir, "modelzoo_tf1_api_census.md"), encoding="utf-8") as handle:
        census = handle.read()

    by_family = collections.defaultdict(list)
    for row in rows:
        path = row["used_as"] or row["name"]
        path = path if path.startswith("tensorflow") else "tensorflow." + path.partition(".")[2]
        status, note = resolve_tensorflow(path, is_import=True)
        if status != MISSING and row["used_as"] and row["used_as"] != row["name"]:
            status, note = resolve_tensorflow(row["name"], is_import=True)
        row["covered"] = status != MISSING
        row["note"] = note
        by_family[_plain(row["family"])].append(row)

    tf115 = [row for row in rows if row["in_tf_1_15"] != "no"]
    print(f"census rows: {len(rows)} ({len(tf115)} TF 1.15 names); covered now: "
          f"{sum(row['covered'] for row in rows)} ({sum(row['covered'] for row in tf115)} TF 1.15)")
    two_plus = [row for row in tf115 if int(row["models"]) >= 2]
    print(f"TF 1.15 rows used by >= 2 models: {len(two_plus)}, covered {sum(row['covered'] for row in two_plus)}")
    print(f"model-uses of missing TF 1.15 names: {sum(int(r['models']) for r in tf115)} before, "
          f"{sum(int(r['models']) for r in tf115 if not r['covered'])} now")

    baseline = int(re.search(r"TensorFlow 1\.15 itself had.*?\*\*(\d+) of 471", census, re.S).group(1))
    greedy = _table_after(census, "Over TF 1.15 names only", 5)
    only = {_plain(cells[0]): int(cells[2]) for cells in _table_after(census, "only TF 1.15 blocker (top 30)", 3)}
    def uncovered_models(name, strict):
        return sum(int(row["models"]) for row in by_family.get(name, [])
                   if (strict or row["in_tf_1_15"] != "no") and not row["covered"])

    def estimate(title, base, greedy_rows, strict, only_blocker):
        print(f"\n{title}\n\n| step | family | uses still missing | unblocks | cumulative |\n|---|---|---|---|---|")
        for cells in greedy_rows:
            print(f"| {cells[0]} | {cells[1]} | {uncovered_models(_plain(cells[1]), strict)} | {cells[2]} | {cells[3]} |")
        in_greedy = {_plain(cells[1]) for cells in greedy_rows}
        total = int(greedy_rows[-1][3].split()[0])
        deficit = sum(uncovered_models(name, strict) for name in in_greedy)
        extra = sum(max(0, count - uncovered_models(family, strict))
                    for family, count in only_blocker.items() if family not in in_greedy)
        lower = base + max(0, total - deficit) + extra
        print(f"\nnow at least {lower}/471 ({100 * lower / 471:.1f}%), census {base}/471 ({100 * base / 471:.1f}%): "
              f"{base} + ({total} that the greedy steps unblock with every family covered - {deficit} model-uses "
              f"still missing in those families) + {extra} (models whose only blocking family, outside the greedy "
              "table, is now covered, less that family's missing model-uses)")
        scope = [row for row in rows if strict or row["in_tf_1_15"] != "no"]
        blocked = sum(int(row["models"]) for row in scope if not row["covered"])
        simple = max(0, 471 - blocked)
        print(f"now at least {simple}/471 ({100 * simple / 471:.1f}%) by the per-name bound: a model still blocked "
              f"uses an uncovered name, so at most {blocked} models (the model-uses of the uncovered rows) are blocked")
        best = max(lower, simple)
        print(f"=> {'headline' if strict else 'TF 1.15 names'}: at least {best}/471 ({100 * best / 471:.1f}%) "
              f"with no missing name (greedy bound {lower}, per-name bound {simple}; target above 80% of 471 = 376.8: >= 377)")

    greedy_strict = _table_after(census, "Same greedy counting every missing name", 4)
    strict_base = int(re.search(r"\*\*(\d+) of 471 models \([\d.]+%\) use only TF1 API", census).group(1))
    estimate("Models with no missing path, every missing name counted (the census headline):", strict_base,
             greedy_strict, True, {})
    estimate("Models with no missing TF 1.15 name (names TF 1.15 lacked left out):", baseline,
             [cells[:4] for cells in greedy], False, only)
    print("\nLower bounds: the CSV has no per-model lists, so each missing model-use is counted as a model still "
          "blocked, and models blocked by several families outside the greedy tables are not counted. Caveat for "
          "both: the CSV gives one example path per missing name (used_as); a row counts as covered when that path "
          "resolves, so another model reaching deeper through the same name could still fail.")

    print("\nfamilies (TF 1.15 rows): covered rows / rows")
    for family, members in sorted(by_family.items(), key=lambda item: -sum(int(r["models"]) for r in item[1])):
        members = [row for row in members if row["in_tf_1_15"] != "no"]
        if members:
            done = sum(row["covered"] for row in members)
            print(f"  {'ok ' if done == len(members) else '   '}{family}: {done}/{len(members)}")
    print(f"\nTF 1.15 rows still missing (models >= {args.min_models}):")
    for row in sorted(tf115, key=lambda r: -int(r["models"])):
        if not row["covered"] and int(row["models"]) >= args.min_models:
            print(f"  {row['models']:>3}  {row['name']}  ({_plain(row['family'])}): {row['note'][:110]}")
    if args.rows:
        print("\ncovered rows:")
        for row in rows:
            if row["covered"]:
                print(f"  {row['models']:>3}  {row['name']}  {row['note'][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
