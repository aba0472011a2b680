"""The TF 1.15 families ModelZoo scripts use, through `npu-sim run`: tensorflow.python internals, slim, contrib, MNIST.

Each script in tests/tf1_scripts/ runs as `npu-sim run` runs it, in a subprocess (the TF1 layer turns
v2 behaviour off for its process); two at a time, once per module. The rest checks tf1compat's parts
in-process (graph mode inside tf.Graph blocks; the import hook is called directly, never installed).
"""

import builtins
import concurrent.futures
import gzip
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.tf1compat import hook, internals, mnist, optimizers, view

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_scripts")
V1 = tf.compat.v1


def write_mnist(folder, train=8, test=4, seed=0):
    """The four MNIST files (idx format, gzip) with random pixels and labels; returns (train images, labels)."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder, exist_ok=True)
    arrays = {}
    for prefix, count in (("train", train), ("t10k", test)):
        images, labels = rng.randint(0, 256, (count, 28, 28)), rng.randint(0, 10, (count,))
        for stem, array, magic in ((f"{prefix}-images-idx3-ubyte", images, 2051),
                                   (f"{prefix}-labels-idx1-ubyte", labels, 2049)):
            header = np.array([magic, *array.shape], ">u4").tobytes()
            with gzip.open(os.path.join(folder, stem + ".gz"), "wb") as handle:
                handle.write(header + array.astype(np.uint8).tobytes())
        arrays[prefix] = (images, labels)
    return arrays["train"]


def _npu_sim(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "npu_sim_bridge", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)


def _run(args):
    if args == ["check"]:
        names = ("tf115_internals.py", "slim_family.py", "contrib_family.py", "contrib_more_family.py",
                 "check_target.py")
        return _npu_sim("check", "--json", *(os.path.join(SCRIPTS, name) for name in names))
    return _npu_sim("run", os.path.join(SCRIPTS, args[0]), *args[1:])


@pytest.fixture(name="runs", scope="module")
def runs_fixture(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mnist"))
    write_mnist(folder)
    scripts = {"internals": ["tf115_internals.py"], "slim": ["slim_family.py"],
               "contrib": ["contrib_family.py", folder], "more": ["contrib_more_family.py"],
               "check_target": ["check_target.py"],
               "check": ["check"]}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_run, args) for name, args in scripts.items()}
        return {name: future.result() for name, future in futures.items()}


def _line(result, prefix):
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    assert lines, f"no line starting {prefix!r}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return lines[-1]


def _value(line, key):
    match = re.search(rf"\b{key} (\S+)", line)
    assert match, f"{key!r} not in {line!r}"
    return match.group(1)


# ---------------------------------------------------------------------------------------------------
# Whole scripts through `npu-sim run`

def test_tensorflow_python_internals_freeze_a_graph_and_keep_tf115_names(runs):
    frozen = _line(runs["internals"], "INTERNALS frozen_variables")
    assert frozen == "INTERNALS frozen_variables 0 same_output True has_freeze_graph True"
    assert _line(runs["internals"], "INTERNALS control") == "INTERNALS control 5 1.0 [[3.0, 4.0], [1.0, 2.0]] 0"
    assert _line(runs["internals"], "INTERNALS checkpoint") == (
        "INTERNALS checkpoint ['dense/bias', 'dense/kernel'] model.ckpt")
    assert _line(runs["internals"], "INTERNALS nest") == "INTERNALS nest True False"


def test_slim_trains_restores_and_keeps_tf115_variable_names(runs):
    trained = _line(runs["slim"], "SLIM trained")
    assert float(_value(trained, "loss_last")) < float(_value(trained, "loss_first"))
    assert _line(runs["slim"], "SLIM variables").split()[2:] == [
        "conv1/BatchNorm/beta", "conv1/BatchNorm/moving_mean", "conv1/BatchNorm/moving_variance", "conv1/weights",
        "sep/BatchNorm/beta", "sep/BatchNorm/moving_mean", "sep/BatchNorm/moving_variance", "sep/depthwise_weights",
        "sep/pointwise_weights", "up/BatchNorm/beta", "up/BatchNorm/moving_mean", "up/BatchNorm/moving_variance",
        "up/weights"]
    restored = _line(runs["slim"], "SLIM restored")
    assert restored.startswith("SLIM restored True params ")
    assert "endpoints ['conv1'] decoded [7] arg_scope_fn True probabilities [2, 3]" in restored


def test_contrib_image_opt_summary_rnn_and_mnist_work_in_a_tf1_script(runs):
    result = runs["contrib"]
    assert _line(result, "CONTRIBX mnist") == "CONTRIBX mnist 6 2 4 (3, 784) (3, 10) True"
    assert _line(result, "CONTRIBX image") == "CONTRIBX image rotate True translate True transform True hsv True"
    opt = _line(result, "CONTRIBX opt")
    assert float(_value(opt, "loss_last")) < float(_value(opt, "loss_first"))
    assert opt.endswith("rows_moved [1, 3]")  # LazyAdam touched only the looked-up embedding rows
    names = _line(result, "CONTRIBX rnn").split()[5:]
    assert names[0] == "layer_norm_basic_lstm_cell/forget/beta" and len(names) == 11
    assert "layer_norm_basic_lstm_cell/kernel" in names and not any(name.endswith("/bias") for name in names)
    assert _line(result, "CONTRIBX summary_files") == "CONTRIBX summary_files 1 static [2, 3]"
    missing = _line(result, "CONTRIBX missing:")
    assert "train-images-idx3-ubyte.gz not found in" in missing and "does not download" in missing
    assert "tf.contrib.quantize.create_training_graph is accepted without effect" in result.stderr


def test_more_contrib_optimizers_rnn_crf_seq2seq_and_keras_names_work(runs):
    result = runs["more"]
    trained = _line(result, "MORE loss_first")
    assert float(_value(trained, "loss_last")) < float(_value(trained, "loss_first"))
    assert trained.endswith("seq_matches True transitions (3, 3)")
    assert _line(result, "MORE averaged_saved") == "MORE averaged_saved True differs_from_live True"
    assert _line(result, "MORE median") == "MORE median [3.0, 4.0] batches 2"
    prefix = "stack_bidirectional_rnn/cell_"
    assert _line(result, "MORE rnn ").split()[2:] == [
        f"{prefix}0/bidirectional_rnn/bw/gru_cell/candidate", f"{prefix}0/bidirectional_rnn/bw/gru_cell/gates",
        f"{prefix}0/bidirectional_rnn/fw/gru_cell/candidate", f"{prefix}0/bidirectional_rnn/fw/gru_cell/gates",
        f"{prefix}1/bidirectional_rnn/bw/lstm_cell", f"{prefix}1/bidirectional_rnn/fw/lstm_cell"]
    assert _line(result, "MORE keras") == (
        "MORE keras pad [[0, 1, 2], [0, 0, 3]] layers 2 multi_gpu_same True warned True policy float16 "
        "mnist_dataset 5")
    assert _line(result, "MORE rnn_more") == (
        "MORE rnn_more [[5, 2, 8], [4, 2, 4], [2, 6], [2, 5, 2]] clipped True params True")
    assert "tf.contrib.tfprof.ProfileContext is accepted without effect" in result.stderr


# ---------------------------------------------------------------------------------------------------
# Parts, in-process

@pytest.fixture(name="hooked")
def hooked_fixture(monkeypatch):
    monkeypatch.setattr(hook, "_original_import", builtins.__import__)
    user = {"__name__": "__main__", "__file__": "/home/someone/project/train.py"}
    return lambda name, fromlist=None: hook._tf1_import(name, user, None, fromlist, 0)  # pylint: disable=W0212


def test_from_tensorflow_python_import_loads_submodules_as_plain_python_does(hooked):
    tools = hooked("tensorflow.python.tools", ("freeze_graph",))
    assert callable(tools.freeze_graph.freeze_graph)
    graph_util = hooked("tensorflow.python.framework.graph_util", ("convert_variables_to_constants",))
    assert graph_util.convert_variables_to_constants is V1.graph_util.convert_variables_to_constants
    ops = hooked("tensorflow.python.framework", ("ops",)).ops
    assert ops.Tensor is tf.Tensor and ops.Graph is tf.Graph  # a TF 1.15 name, and the real module's own
    assert hooked("tensorflow.python.ops.control_flow_ops", ("cond",)).cond is V1.cond
    assert hooked("tensorflow.python.data.experimental.ops", ("threadpool",)).threadpool.PrivateThreadPool(2)
    with pytest.raises(ModuleNotFoundError):
        hooked("tensorflow.python.not_a_module")
    # Keras: Keras 2.15 first, TensorFlow's own legacy copy for what it lacks, TF 1.15 names and the pre-1.9 layout
    assert hooked("tensorflow.python.keras.layers", ("merge",)).merge.__name__ == "tensorflow.python.keras.layers.merge"
    callbacks = hooked("tensorflow.python.keras._impl.keras", ("callbacks",)).callbacks
    assert callbacks.History is sys.modules["keras.src.callbacks"].History


def test_python_view_prefers_the_real_module_and_writes_through_to_it():
    nest_view = view.python_view(sys.modules["tensorflow.python.util.nest"])
    assert nest_view.flatten is tf.nest.flatten and nest_view.is_sequence is tf.nest.is_nested
    assert "is_sequence" in dir(nest_view)
    real = sys.modules["tensorflow.python.util.nest"]
    nest_view.npu_sim_marker = 1
    try:
        assert real.npu_sim_marker == 1
    finally:
        del real.npu_sim_marker
    assert internals.where("tensorflow.python.util.nest", "is_sequence") == "tf.nest.is_nested"


def test_lars_step_is_momentum_on_the_trust_scaled_gradient():
    w0, g, lr, wd, eeta = np.array([3.0, 4.0]), np.array([0.6, 0.8]), 0.1, 0.01, 0.5
    with tf.Graph().as_default(), V1.Session() as sess:
        var = V1.Variable(w0, dtype=tf.float64)
        step = optimizers.LARSOptimizer(lr, momentum=0.9, weight_decay=wd, eeta=eeta).apply_gradients(
            [(tf.constant(g), var)])
        sess.run(V1.global_variables_initializer())
        sess.run(step)
        once = sess.run(var)
        sess.run(step)
        twice = sess.run(var)
    trust = eeta * 5.0 / (1.0 + wd * 5.0)
    first = lr * trust * (g + wd * w0)
    np.testing.assert_allclose(once, w0 - first)
    trust2 = eeta * np.linalg.norm(once) / (1.0 + wd * np.linalg.norm(once))
    np.testing.assert_allclose(twice, once - (0.9 * first + lr * trust2 * (g + wd * once)))


def test_lazy_adam_updates_only_the_rows_of_a_sparse_gradient():
    with tf.Graph().as_default(), V1.Session() as sess:
        table = V1.Variable(np.ones((4, 2)), dtype=tf.float64)
        grad = tf.IndexedSlices(tf.constant([[0.5, -1.0], [0.5, 1.0]], tf.float64), tf.constant([2, 2]), [4, 2])
        step = optimizers.LazyAdamOptimizer(0.1).apply_gradients([(grad, table)])
        sess.run(V1.global_variables_initializer())
        sess.run(step)
        value = sess.run(table)
    np.testing.assert_array_equal(value[[0, 1, 3]], 1.0)
    g = np.array([1.0, 0.0])  # the duplicate rows' gradients summed
    m, v = 0.1 * g, 0.001 * g * g
    np.testing.assert_allclose(value[2], 1.0 - 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9) * m / (np.sqrt(v) + 1e-8))


def test_adamw_decays_the_weights_before_the_adam_step():
    with tf.Graph().as_default(), V1.Session() as sess:
        var = V1.Variable([2.0, -4.0], dtype=tf.float64)
        step = optimizers.AdamWOptimizer(0.1, learning_rate=0.01).apply_gradients([(tf.constant([0.5, 0.5],
                                                                                               tf.float64), var)])
        sess.run(V1.global_variables_initializer())
        sess.run(step)
        value = sess.run(var)
    adam_step = 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9) * 0.05 / (np.sqrt(0.001 * 0.25) + 1e-8)
    np.testing.assert_allclose(value, np.array([2.0, -4.0]) * 0.9 - adam_step)


@pytest.mark.parametrize("interpolation", ["nearest", "lower", "higher", "midpoint", "linear"])
def test_percentile_matches_numpy(interpolation):
    from npu_sim_bridge.tf1compat.contrib_more import percentile

    values = np.random.RandomState(1).rand(3, 7, 4)
    with tf.Graph().as_default(), V1.Session() as sess:
        result = sess.run(percentile(values, 30.0, axis=[0, 2], interpolation=interpolation, keep_dims=True))
    expected = np.percentile(values, 30.0, axis=(0, 2), method=interpolation, keepdims=True)
    np.testing.assert_allclose(result, expected)


def test_mnist_reader_batches_across_epochs_and_names_bad_files(tmp_path):
    images, labels = write_mnist(str(tmp_path), train=5, test=2)
    data = mnist.read_data_sets(str(tmp_path), validation_size=1, seed=3)
    assert data.train.images.shape == (4, 784) and data.train.images.dtype == np.float32
    np.testing.assert_allclose(data.validation.images[0], images[0].reshape(784) / 255.0, rtol=1e-6)
    assert data.validation.labels.tolist() == labels[:1].tolist()
    batches = [data.train.next_batch(3)[1] for _ in range(2)]
    assert [len(batch) for batch in batches] == [3, 3] and data.train.epochs_completed == 1
    assert sorted(batches[0].tolist() + batches[1][:1].tolist()) == sorted(labels[1:].tolist())
    with open(tmp_path / "t10k-labels-idx1-ubyte.gz", "wb") as handle:
        handle.write(gzip.compress(np.array([1234, 2], ">u4").tobytes()))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte.gz: not an MNIST label file \(magic number 1234"):
        mnist.read_data_sets(str(tmp_path))


# ---------------------------------------------------------------------------------------------------
# npu-sim check: the same answer as the run

def _check_entries(runs):
    result = runs["check"]
    assert result.returncode == 1, result.stderr[-3000:]  # check_target.py has a missing API
    return json.loads(result.stdout)["apis"]


def test_check_finds_nothing_missing_in_the_scripts_that_run(runs):
    for name in ("internals", "slim", "contrib", "more"):
        assert runs[name].returncode == 0
    entries = _check_entries(runs)
    missing = [entry for entry in entries if entry["status"] == "missing"]
    assert [entry["api"] for entry in missing] == ["tensorflow.contrib.cloud.BigtableClient"]
    by_api = {entry["api"]: entry for entry in entries}
    graph_util = by_api["tensorflow.python.framework.graph_util.convert_variables_to_constants"]
    assert graph_util["status"] == "provided" and "tf.compat.v1.graph_util" in graph_util["note"]
    assert by_api["tensorflow.contrib.image.rotate"]["status"] == "provided with a difference"
    assert by_api["tensorflow.contrib.quantize.create_training_graph"]["status"] == "accepted without effect"
    assert by_api["npu_bridge.npu_init.npu_config_proto"]["status"] == "provided"


def test_check_names_the_line_and_message_where_run_stops(runs):
    missing = next(entry for entry in _check_entries(runs) if entry["status"] == "missing")
    path, line = missing["locations"][0].rsplit(":", 1)
    assert path == os.path.join(SCRIPTS, "check_target.py")
    result = runs["check_target"]
    assert result.returncode == 1 and "CHECK_TARGET built" not in result.stdout
    frames = re.findall(r'File "([^"]+)", line (\d+)', result.stderr)
    assert frames[-1] == (path, line)
    assert result.stderr.rstrip().splitlines()[-2].endswith(missing["note"])


def test_check_command_line_text_and_errors(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import tensorflow as tf\nfrom npu_bridge.estimator import npu_ops\nx = tf.mul(1, 2)\n"
                      "npu_ops.not_an_op()\nimport npu_bridge.no_such_module\nslim = tf.contrib.slim\n"
                      "FLAGS = tf.app.flags.FLAGS\nprint(FLAGS.steps, slim.conv2d, slim.not_in_slim)\n"
                      "from npu_bridge.estimator.npu import npu_plugin\nnpu_plugin.npu_close()\n")
    (tmp_path / "py2.py").write_text("print 'python 2'\n")
    result = _npu_sim("check", str(tmp_path))
    assert result.returncode == 1
    assert f"missing: tensorflow.mul  [{script}:3]" in result.stdout
    assert f"missing: npu_bridge.estimator.npu_ops.not_an_op  [{script}:4]" in result.stdout
    assert f"missing: npu_bridge.no_such_module  [{script}:5]" in result.stdout
    assert f"missing: tensorflow.contrib.slim.not_in_slim  [{script}:8]" in result.stdout  # through `slim = ...`
    assert f"not read: {tmp_path / 'py2.py'}: SyntaxError" in result.stdout
    assert f"accepted without effect: npu_bridge.estimator.npu.npu_plugin.npu_close  [{script}:10]" in result.stdout
    assert "4 missing" in result.stdout.splitlines()[-1] and "in 2 files" in result.stdout.splitlines()[-1]
    report = json.loads(_npu_sim("check", "--json", str(script)).stdout)
    by_api = {entry["api"]: entry for entry in report["apis"]}
    assert by_api["tensorflow.app.flags.FLAGS.steps"]["status"] == "provided"  # a flag: the program's own
    assert by_api["tensorflow.contrib.slim.conv2d"]["locations"] == [f"{script}:8"]
    assert report["summary"]["missing"] == 4 and report["unreadable"] == {}
    absent = _npu_sim("check", str(tmp_path / "nothing.py"))
    assert absent.returncode == 2 and "nothing.py' does not exist" in absent.stderr


def test_scipy_optimizer_interface_says_to_install_scipy_when_it_is_missing(monkeypatch):
    from npu_sim_bridge.tf1compat.scipy_optimizer import ScipyOptimizerInterface

    monkeypatch.setitem(sys.modules, "scipy", None)  # what an environment without scipy gives
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with tf.Graph().as_default(), V1.Session() as sess:
        var = V1.Variable([1.0, 2.0])
        interface = ScipyOptimizerInterface(tf.reduce_sum(tf.square(var)))
        sess.run(V1.global_variables_initializer())
        with pytest.raises(ImportError, match="ScipyOptimizerInterface needs scipy, which is not installed: pip "
                                              "install scipy"):
            interface.minimize(sess)
