"""Recounts the npu_bridge census's names against this simulator: imports each name through the alias.

Reads the tables of ../shared/reference/modelzoo_npu_bridge_census.md (or --census FILE): the
"Top names" table and the "Missing names" table, each row a name and the number of ModelZoo models
using it. Each name is resolved as a script would: `import` of its longest module prefix with the
npu_bridge alias installed (install_alias), then getattr along the rest (`mod.*` is the module
itself). Prints every name the simulator still lacks with its model count, the names the census
listed as missing that now resolve, and bounds on the models still blocked (the census gives model
counts per name, not the set of names per model: at least the largest count of a missing name,
at most their sum; and an estimate that takes names sharing the census's example model as used by
the same models).
Run:  python benchmarks/npu_bridge_census.py [--census FILE] [--all]
"""

import argparse
import importlib
import os
import re
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from npu_sim_bridge.runtime.alias import install_alias  # noqa: E402

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The census sits next to the checkout, or next to the folder that holds the worktrees.
_CANDIDATES = [os.path.normpath(os.path.join(_CHECKOUT, *up, "shared", "reference", "modelzoo_npu_bridge_census.md"))
               for up in (("..",), ("..", ".."))]
DEFAULT_CENSUS = next((path for path in _CANDIDATES if os.path.isfile(path)), _CANDIDATES[0])
CORPUS_MODELS = 467  # models of the corpus that use npu_bridge (the census's denominator)
_ROW = re.compile(r"^\|(?: \d+ \|)? `(?P<name>[^`]+)` \| (?P<models>\d+) \| (?P<files>\d+) \| (?P<rest>.*)$")


def read_census(path):
    """name -> (models, census said missing, example model folder or None) from both tables of the census file."""
    names = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = _ROW.match(line.strip())
            if match is None or not match["name"].startswith(("npu_bridge", "hccl", "precision_tool")):
                continue  # the parameter_map table's rows are keys, not importable names
            missing = "MISSING" in match["rest"] or "missing-" in match["rest"]
            name, models = match["name"], int(match["models"])
            example = re.findall(r"`([^`]+\.py)`", match["rest"])
            model = "/".join(example[-1].split("/")[:3]) if example else None
            known = names.get(name)
            if known:
                models, missing, model = max(models, known[0]), missing or known[1], model or known[2]
            names[name] = (models, missing, model)
    return names


def resolve(name):
    """None when `name` imports and resolves as a script would get it, else the error text.

    A name that resolves to a function marked `not_simulated` (it raises NotImplementedError naming
    itself when called) counts as missing, with that reason.
    """
    parts = name.split(".")
    if parts[-1] == "*":
        parts = parts[:-1]
    for end in range(len(parts), 0, -1):
        module_name = ".".join(parts[:end])
        try:
            value = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and not module_name.startswith(error.name):
                return f"{type(error).__name__}: {error}"
            continue
        except Exception as error:  # noqa: BLE001 - reported per name: the census counts what fails
            return f"{type(error).__name__}: {error}"
        for attr in parts[end:]:
            if not hasattr(value, attr):
                return f"{'.'.join(parts[:end])} has no attribute {attr!r}"
            value = getattr(value, attr)
        if getattr(value, "not_simulated", False):
            return "resolves, but raises NotImplementedError when called (not simulated)"
        return None
    return f"no module {parts[0]!r}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--census", default=DEFAULT_CENSUS, help="the census markdown file")
    parser.add_argument("--all", action="store_true", help="also list the names that resolve")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.census):
        parser.error(f"census file {args.census!r} does not exist; pass --census PATH")
    names = read_census(args.census)
    install_alias()
    warnings.simplefilter("ignore")
    rows = [(models, name, was_missing, resolve(name)) for name, (models, was_missing, _) in names.items()]
    rows.sort(key=lambda row: (-row[0], row[1]))
    missing = [row for row in rows if row[3] is not None]
    fixed = [row for row in rows if row[3] is None and row[2]]
    print(f"{len(names)} names read from {os.path.normpath(args.census)}; "
          f"{sum(1 for row in rows if row[2])} were missing in the census, {len(missing)} are missing now\n")
    print("Still missing (models, name, why):")
    for models, name, _, why in missing:
        print(f"  {models:4d}  {name}  -- {why}")
    print("\nMissing in the census, resolved now (models, name):")
    for models, name, _, _ in fixed:
        print(f"  {models:4d}  {name}")
    if args.all:
        print("\nResolving (models, name):")
        for models, name, _, _ in (row for row in rows if row[3] is None and not row[2]):
            print(f"  {models:4d}  {name}")
    low = max((row[0] for row in missing), default=0)
    high = min(CORPUS_MODELS, sum(row[0] for row in missing))
    groups = {}
    for models, name, _, _ in missing:
        example = names[name][2] or name
        groups[example] = max(groups.get(example, 0), models)
    estimate = min(CORPUS_MODELS, sum(groups.values()))
    print(f"\nModels still touching a missing name: between {low} and {high} of {CORPUS_MODELS} "
          f"(census: 85); models with no missing name: between {100 * (CORPUS_MODELS - high) / CORPUS_MODELS:.1f}% "
          f"and {100 * (CORPUS_MODELS - low) / CORPUS_MODELS:.1f}% (census: 81.8%)")
    print(f"Estimate, taking names with the same example model as used by the same models: {estimate} models "
          f"({100 * (CORPUS_MODELS - estimate) / CORPUS_MODELS:.1f}% with no missing name); example models: "
          + ", ".join(f"{model.split('/')[-1]} ({count})" for model, count in sorted(groups.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
