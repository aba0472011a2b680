"""The ModelZoo's 810 import statements: `npu-sim check` and `npu-sim run` agree on each, and star imports of its
tensorflow.python modules give the TF 1.15 names.

One `npu-sim run` process runs every statement (a try block each), one `npu-sim check --json` reads a
file of them (testing/import_corpus.py); the corpus is ../shared/reference beside the repository, and
its absence is an error that says where it was looked for.
"""

import concurrent.futures
import importlib.util
import json

import pytest

from npu_sim_bridge import api_resolve
from npu_sim_bridge.testing import import_corpus
from npu_sim_bridge.tf1compat import packages


@pytest.fixture(name="corpus", scope="module")
def corpus_fixture():
    statements = import_corpus.load_statements()
    texts = [statement.text for statement in statements]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        run = pool.submit(import_corpus.run_statements, texts)
        check = pool.submit(import_corpus.check_statements, texts)
        return texts, run.result(), check.result()


def test_the_corpus_is_what_its_header_says():
    statements, models = import_corpus.load_statements(), import_corpus.load_models()
    assert len(statements) == 810 and len(models) == 481
    assert all(0 <= index < len(statements) for indices in models.values() for index in indices)


def test_a_missing_corpus_says_where_it_was_looked_for(tmp_path):
    with pytest.raises(import_corpus.CorpusMissing, match=f"not in {tmp_path}.*NPU_SIM_REFERENCE_DIR"):
        import_corpus.load_statements(str(tmp_path))


def test_nothing_check_calls_provided_fails_at_run(corpus):
    texts, errors, verdicts = corpus
    wrong = [(text, error, verdict[1]) for text, error, verdict in zip(texts, errors, verdicts)
             if verdict[0] not in (None, "missing") and error]
    assert not wrong


def test_nothing_that_runs_is_called_missing(corpus):
    texts, errors, verdicts = corpus
    wrong = [(text, verdict[1]) for text, error, verdict in zip(texts, errors, verdicts)
             if verdict[0] == "missing" and not error]
    assert not wrong


def test_check_reports_every_statement_of_the_packages_it_covers(corpus):
    texts, errors, verdicts = corpus
    covered = [index for index, text in enumerate(texts) if api_resolve.is_root(import_corpus.top_package(text))]
    assert len(covered) >= 800  # all but a few models' own modules named tensorflow_*
    assert [texts[index] for index in covered if verdicts[index][0] is None] == []
    not_covered = {import_corpus.top_package(texts[index]) for index in range(len(texts)) if index not in covered}
    assert not_covered == {"tensorflow_utils", "tensorflow_extentions"}  # a model's own modules: never run


def test_every_failing_tensorflow_or_npu_bridge_statement_is_a_known_one(corpus):
    texts, errors, _ = corpus
    failing = {text for text, error in zip(texts, errors)
               if error and import_corpus.top_package(text) in import_corpus.OWN_PACKAGES}
    assert failing <= set(import_corpus.NOT_IN_TF115) | set(import_corpus.KNOWN_GAPS), failing
    assert set(import_corpus.NOT_IN_TF115) <= failing  # they fail with the real stack too: not faked here
    google = errors[texts.index("import tensorflow.google as tf")]
    assert "No module named 'tensorflow.google': neither the TensorFlow 1.15 API" in google
    assert "check the module path" in google


def test_a_missing_companion_package_names_its_pip_command(corpus):
    texts, errors, verdicts = corpus
    absent = [name for name in packages.PACKAGES if importlib.util.find_spec(name) is None]
    if not absent:
        pytest.skip("every companion package is installed here: none can be reported missing")
    by_package = {import_corpus.top_package(text): index for index, text in enumerate(texts)}
    for name in absent:
        requirement = packages.PACKAGES[name][0]
        index = by_package[name]
        assert f"pip install {requirement}" in errors[index]
        status, apis = verdicts[index]
        assert status == "missing" and all(f"pip install {requirement}" in note for _, _, note in apis)


STAR_SCRIPT = """
import json, types
from npu_sim_bridge.tf1compat import internals
report = {}
for module, corpus_names in json.loads(MODULES).items():
    star, plain = {"__name__": "__main__", "__file__": __file__}, {"__name__": "__main__", "__file__": __file__}
    try:
        exec(f"from {module} import *", star)
        exec(f"import {module} as _npu_sim_module", plain)
    except Exception as error:
        report[module] = [f"{type(error).__name__}: {error}"]
        continue
    found = plain["_npu_sim_module"]
    by_attribute = {name: getattr(found, name, types) for name in corpus_names}  # `types`: not there
    expected = [name for name, value in by_attribute.items() if value is not types
                and not isinstance(value, types.ModuleType)]
    expected += [name for name in internals.names(found.__name__) if not name.startswith("_")]
    report[module] = sorted(name for name in expected if name not in star)
print("STAR_REPORT " + json.dumps(report))
"""


def test_a_star_import_of_each_tensorflow_python_module_gives_its_tf115_names(tmp_path):
    modules = {}
    for statement in import_corpus.load_statements():
        words = statement.text.replace(",", " ").split()
        if words[0] == "from" and words[1].startswith(("tensorflow.python.", "tensorflow_core.python.")):
            names = [word for word in words[3:] if word not in ("as", "*")]
            if "as" in words:  # `from m import a as b`: only `a` is the module's name
                names = [words[3]]
            modules.setdefault(words[1], set()).update(name for name in names if not name.startswith("_"))
    assert len(modules) > 50
    script = tmp_path / "stars.py"
    script.write_text(f"MODULES = {json.dumps(json.dumps({m: sorted(n) for m, n in modules.items()}))}\n" + STAR_SCRIPT)
    result = import_corpus.npu_sim(["run", str(script)], 600)
    lines = [line for line in result.stdout.splitlines() if line.startswith("STAR_REPORT ")]
    assert result.returncode == 0 and lines, result.stderr[-3000:]
    report = json.loads(lines[-1][len("STAR_REPORT "):])
    assert report["tensorflow.python.ops.rnn_cell"] == [] and "tensorflow.python.ops.rnn_cell" in report
    assert {module: missing for module, missing in report.items() if missing} == {}
