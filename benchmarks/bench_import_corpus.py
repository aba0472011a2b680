"""Share of the ModelZoo's 481 model folders whose every tensorflow*/npu_bridge* import runs under `npu-sim run`.

Runs the 810 distinct import statements of ../shared/reference/modelzoo_import_statements.tsv in one
`npu-sim run` process (a try block each) and reads them with one `npu-sim check --json`, then prints:
  - the share of model folders whose every TensorFlow (tensorflow, tensorflow_core) and npu_bridge
    import runs; the same counted as the issue did (tensorflow.* and npu_bridge.* only); and the same
    without the statements that name what TensorFlow 1.15 and npu_bridge never had;
  - the share with TensorFlow's companion packages (tensorflow_hub, ...) counted too: a model using one
    that is not installed in this environment fails;
  - how check and run agree statement by statement;
  - each statement that fails, with the models using it.
Usage: python benchmarks/bench_import_corpus.py [--reference-dir DIR]
"""

import argparse
import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from npu_sim_bridge.testing import import_corpus  # noqa: E402  (after the path is set)


def _share(label, passing_total):
    passing, total = passing_total
    print(f"{label}: {passing}/{total} model folders ({100 * passing / total:.2f}%)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-dir", default=None, help="folder with the corpus files (default: "
                        "../shared/reference beside the repository)")
    args = parser.parse_args(argv)
    try:
        statements = import_corpus.load_statements(args.reference_dir)
        models = import_corpus.load_models(args.reference_dir)
    except import_corpus.CorpusMissing as error:
        print(f"bench_import_corpus: {error}", file=sys.stderr)
        return 2
    texts = [statement.text for statement in statements]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        run_future = pool.submit(import_corpus.run_statements, texts)
        check_future = pool.submit(import_corpus.check_statements, texts)
        errors, verdicts = run_future.result(), check_future.result()

    failing = {index for index, error in enumerate(errors) if error}
    top = [import_corpus.top_package(text) for text in texts]
    own = {index for index in failing if top[index] in import_corpus.OWN_PACKAGES}
    print(f"{len(texts)} statements, {len(models)} model folders; {len(failing)} statements fail under npu-sim run "
          f"({len(own)} of TensorFlow / npu_bridge)")
    _share("every TensorFlow (tensorflow, tensorflow_core) and npu_bridge import runs",
           import_corpus.model_share(models, own))
    _share("  counted as issue 38 counted (tensorflow.* and npu_bridge.* only)",
           import_corpus.model_share(models, {i for i in own if top[i] in ("tensorflow", "npu_bridge")}))
    _share("  leaving out the statements TensorFlow 1.15 and npu_bridge never had",
           import_corpus.model_share(models, {i for i in own if texts[i] not in import_corpus.NOT_IN_TF115}))
    _share("with TensorFlow's companion packages counted (as installed here)", import_corpus.model_share(models, failing))

    checked = [index for index, (status, _) in enumerate(verdicts) if status is not None]
    false_provided = [i for i in checked if verdicts[i][0] != "missing" and errors[i]]
    false_missing = [i for i in checked if verdicts[i][0] == "missing" and not errors[i]]
    print(f"check vs run: {len(checked)} statements reported by check; {len(checked) - len(false_provided) - len(false_missing)} "
          f"agree, {len(false_provided)} not missing in check but failing at run, {len(false_missing)} missing in "
          f"check but running; {len(texts) - len(checked)} not reported (a model's own modules: "
          f"{', '.join(sorted({top[i] for i in range(len(texts)) if verdicts[i][0] is None}))})")
    for index in false_provided + false_missing:
        print(f"  DISAGREE {texts[index]}: run {errors[index]!r}, check {verdicts[index][0]}")

    users = {}
    for model, indices in models.items():
        for index in indices:
            users.setdefault(index, []).append(model)
    print("\nfailing statements (models using it):")
    for index in sorted(failing, key=lambda i: (-len(users.get(i, [])), i)):
        why = import_corpus.NOT_IN_TF115.get(texts[index]) or import_corpus.KNOWN_GAPS.get(texts[index]) or ""
        print(f"  {len(users.get(index, []))}  {texts[index]}\n      {errors[index][:200]}" + (f"\n      ({why})" if why else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
