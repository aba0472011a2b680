"""How each route of the bad-input table runs a row the way a user would, and what came of it (an Outcome).

Routes: api (npu_sim_bridge.rewrite), session (a tf.compat.v1.Session whose config names the
optimizer), npurunconfig, estimator, cli (npu-sim's main in this process) and process (a fresh
Python or npu-sim process, for what only a process shows: import-time environment, the shim
cache, Ctrl-C, a full disk, exit statuses). Every Session run and every process has a time limit.
"""

import contextlib
import dataclasses
import glob
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import warnings

import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.native import build, entry

from bad_input_materials import small_graph, tiny_graph

TRACEBACK = "Traceback (most recent call last)"
RUN_TIMEOUT_MS = 120_000
PROCESS_TIMEOUT_S = 300


@dataclasses.dataclass
class Outcome:
    kind: str  # ok, error, or what must never happen: traceback, abort, hang, unrewritten
    message: str = ""
    warnings: list = dataclasses.field(default_factory=list)
    status: int | None = None
    result: object = None


def fill(value, places):
    """`value` with {m}, {tmp}, {npu_sim} replaced in every string."""
    if isinstance(value, str):
        for key, text in places.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [fill(item, places) for item in value]
    if isinstance(value, dict):
        return {fill(key, places): fill(item, places) for key, item in value.items()}
    return value


def _caught_warnings(caught):
    return [str(warning.message) for warning in caught]


def run_api(inp, monkeypatch):
    graph = inp["graph"]
    graph = graph["python"] if isinstance(graph, dict) else graph
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in range(inp.get("repeat", 1)):
                result = npu_sim_bridge.rewrite(graph, inp.get("options", {}), fetches=inp.get("fetches"))
        except NpuSimError as err:
            return Outcome("error", str(err), _caught_warnings(caught))
        except Exception as err:  # noqa: BLE001 - the table counts it
            return Outcome("traceback", f"{type(err).__name__}: {err}")
    return Outcome("ok", "", _caught_warnings(caught) + list(result.report.warnings), result=result.graph_def)


def _set_param(custom, key, value):
    if isinstance(value, dict):  # {"b": True}: a field written on purpose
        field, raw = next(iter(value.items()))
        setattr(custom.parameter_map[key], field, raw)
    elif isinstance(value, bool):
        custom.parameter_map[key].b = value
    elif isinstance(value, int):
        custom.parameter_map[key].i = value
    else:
        custom.parameter_map[key].s = value.encode("utf-8")


def session_config(inp):
    config = tf.compat.v1.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    names = inp.get("names", ["NpuOptimizer"])
    per_entry = inp.get("params_per_entry", [{}] * len(names))
    for name, extra in zip(names, per_entry):
        custom = rewrite.custom_optimizers.add()
        custom.name = name
        for key, value in {**inp.get("params", {}), **inp.get("params_raw", {}), **extra}.items():
            _set_param(custom, key, value)
    if "min_graph_nodes" in inp:
        rewrite.min_graph_nodes = inp["min_graph_nodes"]
    if inp.get("disable_meta_optimizer"):
        rewrite.disable_meta_optimizer = True
    if inp.get("iterations") == "ONE":
        rewrite.meta_optimizer_iterations = RewriterConfig.ONE
    if inp.get("place_pruned_graph"):
        config.graph_options.place_pruned_graph = True
    if "meta_optimizer_timeout_ms" in inp:
        rewrite.meta_optimizer_timeout_ms = inp["meta_optimizer_timeout_ms"]
    if inp.get("helper"):
        from npu_sim_bridge.npu_init import npu_config_proto

        config = npu_config_proto(config)
    return config


def _inject(fault, monkeypatch):
    import npu_sim_bridge.passes as passes

    def raising(error):
        def run_pipeline(*args, **kwargs):
            raise error
        return run_pipeline

    original = entry.failing_graph
    if fault == "pipeline_bug":
        monkeypatch.setattr(passes, "run_pipeline", raising(ValueError("injected bug")))
    elif fault == "pipeline_memory_error":
        monkeypatch.setattr(passes, "run_pipeline", raising(MemoryError("injected")))
    elif fault == "error_graph_encoding":  # the message cannot be carried: the fixed one must be
        def only_fixed_message(graph_def, fetch, message):
            if message != entry.FALLBACK_MESSAGE:
                message.encode("ascii", "strict")  # fails: the message holds \udcff
            return original(graph_def, fetch, message)

        monkeypatch.setattr(passes, "run_pipeline", raising(ValueError("bad text \udcff")))
        monkeypatch.setattr(entry, "failing_graph", only_fixed_message)
    elif fault == "error_path_broken":  # nothing in Python works: the shim itself must fail the run
        monkeypatch.setattr(passes, "run_pipeline", raising(ValueError("injected bug")))
        monkeypatch.setattr(entry, "failing_graph", lambda *args: (_ for _ in ()).throw(MemoryError()))


def run_session(inp, monkeypatch):
    for key, value in inp.get("environb", {}).items():
        raw = value.encode("utf-8").decode("unicode_escape").encode("latin-1")
        monkeypatch.setitem(os.environb, key.encode(), raw)
    _inject(inp.get("fault"), monkeypatch)
    config = session_config(inp)
    messages = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(inp.get("repeat_sessions", 1)):
            graph, y = tiny_graph() if inp.get("graph") == "tiny" else small_graph()
            x = graph.get_tensor_by_name("x:0")
            try:
                with tf.compat.v1.Session(graph=graph, config=config) as sess:
                    value = sess.run(y, {x: [[1.0, 2.0], [3.0, 4.0]]},
                                     options=tf.compat.v1.RunOptions(timeout_in_ms=RUN_TIMEOUT_MS))
            except tf.errors.DeadlineExceededError as err:
                return Outcome("hang", err.message)
            except (tf.errors.OpError, NpuSimError) as err:
                return Outcome("error", getattr(err, "message", str(err)), _caught_warnings(caught))
            except Exception as err:  # noqa: BLE001 - the table counts it
                return Outcome("traceback", f"{type(err).__name__}: {err}")
    reports = npu_sim_bridge.recent_reports()
    if not reports:
        return Outcome("unrewritten", "the Session ran without a report: the graph was not rewritten")
    messages = _caught_warnings(caught) + [text for report in reports for text in report.warnings]
    return Outcome("ok", "", messages, result=value)


def run_npurunconfig(inp, monkeypatch):
    from npu_sim_bridge.npu_init import NPURunConfig

    kwargs = dict(inp.get("kwargs", {}))
    if "session_config" in inp:
        kwargs["session_config"] = session_config({"params": inp["session_config"]})
    try:
        return Outcome("ok", result=NPURunConfig(**kwargs))
    except (TypeError, ValueError, NpuSimError) as err:
        return Outcome("error", str(err))
    except Exception as err:  # noqa: BLE001 - the table counts it
        return Outcome("traceback", f"{type(err).__name__}: {err}")


def run_estimator(inp, monkeypatch):
    from npu_sim_bridge.npu_init import NPUEstimator, NPURunConfig

    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(tf.compat.v1.layers.dense(features, 1))
        step = tf.compat.v1.train.get_or_create_global_step()
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.assign_add(step, 1))

    configs = {"RunConfig": lambda: tf.estimator.RunConfig(),
               "NPURunConfig": lambda: NPURunConfig(model_dir=inp.get("config_model_dir"), **inp.get("kwargs", {})),
               None: lambda: None}
    for key, value in inp.get("environb", {}).items():
        monkeypatch.setitem(os.environb, key.encode(), value.encode("utf-8").decode("unicode_escape").encode("latin-1"))

    def input_fn():
        return tf.compat.v1.data.Dataset.from_tensors(tf.ones([2, 3])).repeat()

    try:
        estimator = NPUEstimator(model_fn=inp.get("model_fn", "fn") and model_fn, config=configs[inp["config"]](),
                                 model_dir=inp.get("model_dir"))
        if inp.get("train"):
            estimator.train(input_fn, steps=1)
    except (TypeError, ValueError, NpuSimError, tf.errors.OpError) as err:
        return Outcome("error", getattr(err, "message", str(err)))
    except Exception as err:  # noqa: BLE001 - the table counts it
        return Outcome("traceback", f"{type(err).__name__}: {err}")
    return Outcome("ok", result=estimator)


def run_cli(inp, monkeypatch, row):
    from npu_sim_bridge.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(inp["argv"])
    except BaseException as error:  # noqa: BLE001 - SystemExit or a traceback: the table counts it
        return Outcome("traceback", f"{type(error).__name__}: {error}\n{err.getvalue()}")
    text = out.getvalue() + err.getvalue()
    if TRACEBACK in text and not row.get("script_traceback"):
        return Outcome("traceback", text, status=status)
    return Outcome("ok" if status == 0 else "error", text, [err.getvalue()], status=status, result=out.getvalue())


def prepare_cache(kind, folder):
    """A copy of this process's shim cache under `folder`, its library truncated or replaced by another one."""
    source = build.shim_path()
    relative = os.path.relpath(source, build.cache_root())
    target = os.path.join(folder, "cache", relative)
    os.makedirs(os.path.dirname(target), mode=0o700)
    for path in (os.path.join(folder, "cache"), *glob.glob(os.path.join(folder, "cache", "**"), recursive=True)):
        if os.path.isdir(path):
            os.chmod(path, 0o700)
    shutil.copy(source, target)
    shutil.copy(source + build.RECORD_SUFFIX, target + build.RECORD_SUFFIX)
    if kind == "truncate":
        os.truncate(target, 1000)
    elif kind == "same_size":  # corrupted in place: only the hash tells
        with open(target, "r+b") as handle:
            handle.seek(-64, os.SEEK_END)
            handle.write(bytes(64))
    else:  # a valid library that registers nothing
        import numpy

        foreign = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), "core", "*.so")))[0]
        shutil.copy(foreign, target)
    return os.path.join(folder, "cache")


def fake_compiler(folder):
    """A stand-in for g++ that "builds" the shim, or the name index, by copying this process's (a real
    compile takes 10-30 s)."""
    path = os.path.join(folder, "fake-cxx")
    index = build.shim_path(build.INDEX_SOURCE, build.INDEX_LIBRARY_NAME)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"#!/bin/sh\nbuilt='{build.shim_path()}'\nwhile [ $# -gt 0 ]; do\n"
                     f"  case \"$1\" in *name_index.cc) built='{index}';; esac\n"
                     "  if [ \"$1\" = -o ]; then shift; cp \"$built\" \"$1\"; fi\n  shift\ndone\n")
    os.chmod(path, 0o755)
    return path


def run_process(inp, places):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(npu_sim_bridge.__file__))),
                                        os.path.dirname(os.path.abspath(__file__))])
    for key, value in inp.get("env", {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    if "cache" in inp:
        env["NPU_SIM_CACHE_DIR"] = prepare_cache(inp["cache"], places["tmp"])
    if inp.get("fake_compiler"):
        env["CXX"] = fake_compiler(places["tmp"])
    for folder in inp.get("mkdir", []):
        os.makedirs(folder, exist_ok=True)
    argv = inp["argv"] if "argv" in inp else [sys.executable, "-c", inp["python"], *inp.get("args", [])]

    def limits():
        if "umask" in inp:
            os.umask(inp["umask"])
        if "fsize" in inp:  # a full disk: writes past this size fail (Python ignores SIGXFSZ)
            resource.setrlimit(resource.RLIMIT_FSIZE, (inp["fsize"], inp["fsize"]))

    try:
        completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S,
                                   preexec_fn=limits, check=False)
    except subprocess.TimeoutExpired as err:
        return Outcome("hang", f"no answer in {err.timeout} s")
    text = completed.stdout + completed.stderr
    if completed.returncode < 0:
        return Outcome("abort", f"killed by signal {-completed.returncode}\n{text}", status=completed.returncode)
    if TRACEBACK in text:
        return Outcome("traceback", text, status=completed.returncode)
    kind = "ok" if completed.returncode == 0 else "error"
    return Outcome(kind, text, [completed.stderr], status=completed.returncode, result=completed.stdout)


def leftovers(folder, empty_only):
    """Files under `folder` that a failed write must not leave: empty ones, or partial temporaries."""
    found = []
    for path in glob.glob(os.path.join(folder, "**"), recursive=True):
        if not os.path.isfile(path):
            continue
        if (empty_only and os.path.getsize(path) == 0) or (not empty_only and ".partial" in path):
            found.append(path)
    return found


def json_error(text):
    """The {"error": ...} object --json printed, or None."""
    try:
        return json.loads(text.strip().splitlines()[-1])["error"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
