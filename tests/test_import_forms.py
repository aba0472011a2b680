"""Every import form on contrib and tensorflow.python paths, under `npu-sim run` and `npu-sim check`, which agree.

The forms: `import a.b.c` (then a.b.c.name), `import a.b.c as x`, `from a.b.c import name`,
`from a.b import c` (then c.name), `from a.b.c import *`, and the attribute chain from `import
tensorflow as tf`. One `npu-sim run` process runs each case in a fresh namespace of the script; one
`npu-sim check --json` reads a file of the same cases, one a line.
"""

import json

import pytest

from npu_sim_bridge.testing import import_corpus

# (module, name): each must work in every form.
PATHS = [
    ("tensorflow.contrib.layers", "batch_norm"), ("tensorflow.contrib.layers", "flatten"),
    ("tensorflow.contrib.layers", "variance_scaling_initializer"), ("tensorflow.contrib.framework", "arg_scope"),
    ("tensorflow.contrib.slim", "conv2d"), ("tensorflow.contrib.slim", "arg_scope"), ("tensorflow.contrib.rnn", "GRUCell"),
    ("tensorflow.contrib.rnn", "LSTMStateTuple"), ("tensorflow.contrib.rnn", "RNNCell"),
    ("tensorflow.contrib.training", "HParams"), ("tensorflow.contrib.metrics", "streaming_mean"),
    ("tensorflow.contrib.seq2seq", "dynamic_decode"), ("tensorflow.contrib.tpu.python.ops.tpu_ops", "cross_replica_sum"),
    ("tensorflow.contrib.framework.python.framework.tensor_util", "reduce_sum_n"),
    ("tensorflow.contrib.framework.python.ops.audio_ops", "audio_spectrogram"),
    ("tensorflow.contrib.learn.python.learn.datasets.base", "maybe_download"),
    ("tensorflow.contrib.learn.python.learn.monitored_session", "MonitoredSession"),
    ("tensorflow.python.ops.rnn_cell", "RNNCell"), ("tensorflow.python.framework.graph_util", "convert_variables_to_constants"),
    ("tensorflow.python.ops.control_flow_ops", "cond"), ("tensorflow.python.util.nest", "is_sequence"),
    ("tensorflow.python.training.tracking.tracking", "AutoTrackable"),
    ("tensorflow_core.python.ops.rnn_cell", "GRUCell"), ("tensorflow_core.contrib.slim", "conv2d"),
]
# (module, name) that TensorFlow 1.15 never had: every form but the star import fails, and check says missing.
ABSENT = [("tensorflow.contrib.layers", "no_such_layer"), ("tensorflow.python.ops.rnn_cell", "NoSuchCell")]


def cases(module, name):
    """[(form, statement, expression that must evaluate afterwards)] for tensorflow.<module>.<name>."""
    parent, _, last = module.rpartition(".")
    root = module.split(".")[0]
    return [("import", f"import {module}", f"{module}.{name}"),
            ("import as", f"import {module} as _m", f"_m.{name}"),
            ("from import name", f"from {module} import {name}", name),
            ("from import module", f"from {parent} import {last}", f"{last}.{name}"),
            ("star", f"from {module} import *", name),
            ("attribute chain", f"import {root} as _tf", f"_tf.{module.partition('.')[2]}.{name}")]


RUN_SCRIPT = """
import json
results = []
for statement, expression in json.loads(CASES):
    namespace = {"__name__": "__main__", "__file__": __file__}
    try:
        exec(compile(statement + "\\n_value = " + expression, __file__, "exec"), namespace)
        results.append(None)
    except Exception as error:
        results.append(f"{type(error).__name__}: {error}".split("\\n")[0])
print("FORMS " + json.dumps(results))
"""


@pytest.fixture(name="outcomes", scope="module")
def outcomes_fixture(tmp_path_factory):
    """[(module, name, form, run error or None, [(api, status, note)] check gave on the case's lines)]."""
    folder = tmp_path_factory.mktemp("forms")
    all_cases = [(module, name, *case) for module, name in PATHS + ABSENT for case in cases(module, name)]
    script = folder / "forms_run.py"
    pairs = [(statement, expression) for *_, statement, expression in all_cases]
    script.write_text(f"CASES = {json.dumps(json.dumps(pairs))}\n" + RUN_SCRIPT)
    check_file, lines = folder / "forms_check.py", []
    for *_, statement, expression in all_cases:
        lines += [statement, f"_value = {expression}"]  # attribute chains are what check follows
    check_file.write_text("\n".join(lines) + "\n")
    run = import_corpus.npu_sim(["run", str(script)], 600)
    found = [line for line in run.stdout.splitlines() if line.startswith("FORMS ")]
    assert found, run.stderr[-3000:]
    errors = json.loads(found[-1][len("FORMS "):])
    check = import_corpus.npu_sim(["check", "--json", str(check_file)], 600)
    by_line = {}
    for entry in json.loads(check.stdout)["apis"]:
        for location in entry["locations"]:
            by_line.setdefault(int(location.rsplit(":", 1)[1]), []).append((entry["api"], entry["status"],
                                                                             entry["note"]))
    return [(module, name, form, error, by_line.get(2 * index + 1, []) + by_line.get(2 * index + 2, []))
            for index, ((module, name, form, _, _), error) in enumerate(zip(all_cases, errors))]


def test_every_form_runs_on_every_path(outcomes):
    failed = [(module, name, form, error) for module, name, form, error, _ in outcomes
              if (module, name) in PATHS and error]
    assert failed == []


def test_check_calls_no_form_on_these_paths_missing(outcomes):
    missing = [(module, name, form, apis) for module, name, form, _, apis in outcomes
               if (module, name) in PATHS and any(status == "missing" for _, status, _ in apis)]
    assert missing == []
    assert all(apis for module, name, form, _, apis in outcomes if (module, name) in PATHS)


def test_a_name_tf115_never_had_fails_in_every_form_and_check_says_missing(outcomes):
    absent = [(form, error, apis) for module, name, form, error, apis in outcomes if (module, name) in ABSENT]
    assert len(absent) == 12
    for form, error, apis in absent:
        assert error is not None, form  # the star import runs; the name is then undefined
        if form != "star":
            assert any(status == "missing" for _, status, _ in apis), (form, apis)
