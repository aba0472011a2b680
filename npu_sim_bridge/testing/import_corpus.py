"""The ModelZoo's import statements (shared/reference), executed by `npu-sim run` and read by `npu-sim check`.

The corpus: modelzoo_import_statements.tsv lists every distinct one-line `tensorflow*` / `npu_bridge*`
import statement of the public Ascend ModelZoo-TensorFlow (with model and file counts), and
modelzoo_import_statements_by_model.tsv which model folder uses which. Both live in the reference
folder of the project's shared data, `../shared/reference` beside the repository.

run_statements() runs them all in one `npu-sim run` process, each in its own try block;
check_statements() gives them all to one `npu-sim check --json` process, one statement a line.
"""

import collections
import json
import os
import subprocess
import sys
import tempfile

STATEMENTS_FILE = "modelzoo_import_statements.tsv"
BY_MODEL_FILE = "modelzoo_import_statements_by_model.tsv"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(REPO_ROOT, "..", "shared", "reference")
_MARKER = "NPU_SIM_IMPORT_CORPUS "

Statement = collections.namedtuple("Statement", ["text", "models", "files"])

# The corpus's own packages (TensorFlow, under both its names, and npu_bridge); the other tensorflow* packages it
# lists are TensorFlow's companions (tensorflow_hub, ...) or a model's own modules (tensorflow_utils).
OWN_PACKAGES = ("tensorflow", "tensorflow_core", "npu_bridge")

# Statements naming what neither TensorFlow 1.15 nor npu_bridge had: they fail on the real stack too.
NOT_IN_TF115 = {
    "import tensorflow.google as tf": "tensorflow.google is Google's internal build, never part of TensorFlow",
    "import tensorflow.contrib.ctc as ctc": "tf.contrib.ctc was gone long before TensorFlow 1.15 (tf.nn.ctc_loss)",
    "import npu_bridge.npu_init.npu_config_proto": "npu_bridge.npu_init is a module and npu_config_proto a function "
                                                   "in it, so this import fails with the real npu_bridge too",
}

# Statements naming what TensorFlow 1.15 or npu_bridge had and npu_sim_bridge does not provide, with why.
KNOWN_GAPS = {
    "from npu_bridge.npu_cpu.lru_cache import *": "npu_cpu's host-embedding LRU cache ops are not simulated",
    **dict.fromkeys((f"from tensorflow.contrib.quantize.python import {name}" for name in
                     ("common", "input_to_ops", "quant_ops")),
                    "the internals of tf.contrib.quantize's rewriting (tf.contrib.quantize is accepted without effect)"),
    "from tensorflow.contrib.training.python.training import sequence_queueing_state_saver as sqss":
        "SequenceQueueingStateSaver (queue-based state saving) has no TensorFlow 2 counterpart",
}


class CorpusMissing(FileNotFoundError):
    """The corpus files are not where the repository expects them."""


def corpus_dir(folder=None):
    """The folder holding the two corpus files (default: ../shared/reference beside the repository)."""
    folder = os.path.abspath(folder or os.environ.get("NPU_SIM_REFERENCE_DIR") or DEFAULT_DIR)
    for name in (STATEMENTS_FILE, BY_MODEL_FILE):
        if not os.path.isfile(os.path.join(folder, name)):
            raise CorpusMissing(
                f"the import-statement corpus file {name} is not in {folder}: clone the project's shared data "
                f"beside the repository (so that {os.path.normpath(DEFAULT_DIR)} holds it), or set "
                "NPU_SIM_REFERENCE_DIR to the folder that holds it")
    return folder


def _rows(path):
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip() and not line.startswith("#")]
    return [line.split("\t") for line in lines[1:]]  # the first is the header


def load_statements(folder=None):
    """The corpus's statements, in file order (row N of the by-model file is index N - 1 here)."""
    path = os.path.join(corpus_dir(folder), STATEMENTS_FILE)
    return [Statement(text.strip(), int(models), int(files)) for text, models, files in _rows(path)]


def load_models(folder=None):
    """{model folder: [statement indices]} (0-based indices into load_statements())."""
    path = os.path.join(corpus_dir(folder), BY_MODEL_FILE)
    return {model: [int(number) - 1 for number in numbers.split()] for model, numbers in _rows(path)}


def top_package(statement):
    """The top-level package a one-line import statement names (`from a.b import c` -> a)."""
    words = statement.split()
    return words[1].split(".")[0] if len(words) > 1 else ""


def npu_sim(args, timeout):
    """`python -m npu_sim_bridge ARGS` in a subprocess of this interpreter (the repository first on the path)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "npu_sim_bridge", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def run_script_source(statements):
    """A script that runs each statement in its own try block and prints one JSON line of errors (None: ran)."""
    lines = ["import json as _npu_sim_json", "_npu_sim_errors = []"]
    for text in statements:
        lines += ["try:", f"    {text}", "    _npu_sim_errors.append(None)",
                  "except (Exception, SystemExit) as _npu_sim_error:",
                  "    _npu_sim_errors.append(f'{type(_npu_sim_error).__name__}: {_npu_sim_error}'.split('\\n')[0])"]
    lines.append(f"print({_MARKER!r} + _npu_sim_json.dumps(_npu_sim_errors))")
    return "\n".join(lines) + "\n"


def run_statements(statements, timeout=600):
    """[None, or the error message] per statement, as `npu-sim run` runs them (one process, a try block each)."""
    with tempfile.TemporaryDirectory(prefix="npu_sim_corpus_") as folder:
        script = os.path.join(folder, "corpus_imports.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(run_script_source(statements))
        result = npu_sim(["run", script], timeout)
    found = [line for line in result.stdout.splitlines() if line.startswith(_MARKER)]
    if not found:
        raise RuntimeError(f"npu-sim run of the corpus script printed no result line (exit status "
                           f"{result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    errors = json.loads(found[-1][len(_MARKER):])
    if len(errors) != len(statements):
        raise RuntimeError(f"npu-sim run reported {len(errors)} results for {len(statements)} statements")
    return errors


def check_statements(statements, timeout=600):
    """[(status, [(api, status, note)])] per statement, as `npu-sim check --json` reads a file of them.

    A statement's status is "missing" when any of its APIs is, else its first API's; None when check
    reports no API on its line.
    """
    with tempfile.TemporaryDirectory(prefix="npu_sim_corpus_") as folder:
        script = os.path.join(folder, "corpus_imports.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write("\n".join(statements) + "\n")
        result = npu_sim(["check", "--json", script], timeout)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"npu-sim check printed no JSON (exit status {result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}") from None
    by_line = collections.defaultdict(list)
    for entry in report["apis"]:
        for location in entry["locations"]:
            by_line[int(location.rsplit(":", 1)[1])].append((entry["api"], entry["status"], entry["note"]))
    verdicts = []
    for number in range(1, len(statements) + 1):
        apis = by_line.get(number, [])
        statuses = [status for _, status, _ in apis]
        verdicts.append(("missing" if "missing" in statuses else (statuses[0] if statuses else None), apis))
    return verdicts


def model_share(models, failing):
    """(models whose every statement is outside `failing`, all models) for {model: [statement indices]}."""
    passing = sum(1 for indices in models.values() if not failing.intersection(indices))
    return passing, len(models)
