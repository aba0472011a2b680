"""The last tf.contrib families of the ModelZoo census: graph_editor, NASCell and seq2seq Helpers, and the rest.

The scripts in tests/tf1_scripts/ run under `npu-sim run` in subprocesses (one `npu-sim check` over all of
them must find nothing missing); the parts are checked in-process inside tf.Graph blocks.
"""

import concurrent.futures
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.tf1compat import graph_editor as select
from npu_sim_bridge.tf1compat import graph_editor_copy, graph_editor_edit

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_scripts")
V1 = tf.compat.v1
RUN_SCRIPTS = ("graph_editor_recompute.py", "seq2seq_helpers.py", "host_embedding_ids.py", "contrib_rest_family.py",
               "graph_transforms_frozen.py", "bucket_by_length.py")


def _npu_sim(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "npu_sim_bridge", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


@pytest.fixture(name="runs", scope="module")
def runs_fixture():
    jobs = {name: ("run", os.path.join(SCRIPTS, name)) for name in RUN_SCRIPTS}
    jobs["check"] = ("check", "--json", *(os.path.join(SCRIPTS, name) for name in RUN_SCRIPTS))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_npu_sim, *args) for name, args in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def _line(result, prefix):
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    assert lines, f"no line starting {prefix!r}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return lines[-1]


def test_graph_editor_recomputes_the_forward_pass_with_equal_gradients_and_trains(runs):
    result = runs["graph_editor_recompute.py"]
    assert _line(result, "GE grads_equal") == (
        "GE grads_equal True rerouted 1 copied 7 view_ops 5 reads_checkpoint False net_ops 16")
    assert _line(result, "GE trained") == "GE trained True"


def test_seq2seq_helpers_train_a_nas_cell_decoder_that_greedy_decoding_then_reproduces(runs):
    result = runs["seq2seq_helpers.py"]
    assert _line(result, "S2S trained") == ("S2S trained True greedy_matches True lengths [4, 3, 2] train_lengths "
                                            "[4, 3, 2] sampled_shape [3] is_helper True")
    assert _line(result, "S2S variables").split()[2:] == [  # TensorFlow 1.15's names: checkpoints load
        "decode/decoder/nas_cell/kernel", "decode/decoder/nas_cell/recurrent_kernel",
        "decode/decoder/projection/bias", "decode/decoder/projection/kernel", "embeddings", "source_states"]
    assert "Object was never used" not in result.stderr
    # Luong attention over a memory of lengths [4, 3, 2]: alignments sum to one and skip the padding
    assert _line(result, "S2S attention") == "S2S attention (3, 4, 6) (3, 4) True True"


def test_embedding_rank_id_gives_rank_address_and_size_per_row_and_names_rows_out_of_range(runs):
    result = runs["host_embedding_ids.py"]
    # mod: row i on server i % 2 at local row i // 2; order: rows 0-9 on the first server, 10-19 on the second
    assert _line(result, "HOST mod") == (
        "HOST mod [[0, 4096, 320], [8, 65536, 320], [8, 66176, 320], [8, 68416, 320]] "
        "order [[0, 4096, 320], [0, 4416, 320], [0, 5696, 320], [8, 68416, 320]] beyond True")
    assert _line(result, "HOST dtype") == "HOST dtype 0 9 float16"  # GE's numbers, not TensorFlow's


def test_all_reduce_tensorrt_learn_experiment_vocabulary_and_attention_decoder_work_in_a_tf1_script(runs):
    result = runs["contrib_rest_family.py"]
    assert _line(result, "REST all_reduce") == "REST all_reduce True True 4"
    assert _line(result, "REST tensorrt") == "REST tensorrt unchanged True"
    assert "tf.contrib.tensorrt.create_inference_graph is accepted without effect" in result.stderr
    # min_eval_frequency=3 of 6 steps: evaluations at steps 3 and 6, each exporting; one export kept
    assert _line(result, "REST experiment") == (
        "REST experiment step 6 evaluations 2 loss_finite True exports_kept 1 saved_model True")
    assert _line(result, "REST predictor") == "REST predictor (2, 1) True"  # the exported model, run again
    # get_registered_ops, _IsBackpropagatable (float, int, bfloat16), Network, loader, projector, in_eager_mode
    assert _line(result, "REST internals") == "REST internals MatMul True [True, False, True] True True True False"
    # export_all_saved_models (EVAL + PREDICT graphs), SavedModelEstimator: the same loss as the Experiment's evaluation
    assert _line(result, "REST saved_model_estimator") == "REST saved_model_estimator True [['eval'], ['serve']]"
    # MultivariateNormalDiag: log_prob and entropy of independent normals; samples with the scales given
    assert _line(result, "REST mvn") == "REST mvn True True [1.0, 2.0]"
    # odeint against the closed forms, and d y(2) / d rate = -4 exp(-1) through the solver's loops
    assert _line(result, "REST odeint") == "REST odeint True True True True"
    assert _line(result, "REST vocabulary") == "REST vocabulary [[1, 2, 3, 0], [1, 4, 3, 5]] [0, 2, 0, 0]"
    assert _line(result, "REST attention ") == "REST attention 3 [2, 2] True"
    names = _line(result, "REST attention_variables").split()[2:]
    assert names[:6] == ["attention_decoder/Attention_0/bias", "attention_decoder/Attention_0/kernel",
                         "attention_decoder/Attention_1/bias", "attention_decoder/Attention_1/kernel",
                         "attention_decoder/AttnOutputProjection/bias", "attention_decoder/AttnOutputProjection/kernel"]
    assert {"attention_decoder/AttnW_1", "attention_decoder/kernel", "attention_decoder/gru_cell/gates/kernel"} <= set(
        names)


def test_transform_graph_folds_batch_norms_and_constants_and_keeps_the_outputs(runs):
    result = runs["graph_transforms_frozen.py"]
    # fold_old_batch_norms removes the FusedBatchNormV3, fold_batch_norms the Mul by a constant after the MatMul
    # (one of the two Muls), remove_nodes the Identity
    assert _line(result, "GT folds") == "GT folds True False 2 1 0"
    same = _line(result, "GT same")
    assert same.startswith("GT same True 24 12 ") and "FusedBatchNorm" not in same and "Identity" not in same
    assert "the transforms ['quantize_weights'] are not provided" in _line(result, "GT error")
    # graph_matcher: Conv2D + batch norm, and (inputs in any order) MatMul scaled by a constant
    assert _line(result, "GT matches") == "GT matches [('Conv2D', 'FusedBatchNormV3', 'w'), ('MatMul', 'Mul', 'w2')]"


def test_bucket_by_sequence_length_batches_one_bucket_at_a_time_padded_to_the_longest(runs):
    result = runs["bucket_by_length.py"]
    # lengths 1 4 2 5 2 6 1 3, boundary 3: two batches of short and two of long sequences; the same without
    # the two examples of length 1 when keep_input is length > 1
    assert _line(result, "BUCKET all") == "BUCKET all 4 [0, 1, 2, 3, 4, 5, 6, 7] True True"
    assert _line(result, "BUCKET kept") == "BUCKET kept 3 [1, 2, 3, 4, 5, 7] True True"


def test_check_finds_nothing_missing_in_these_scripts(runs):
    result = runs["check"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    entries = {entry["api"]: entry for entry in json.loads(result.stdout)["apis"]}
    assert entries["tensorflow.contrib.graph_editor.copy_with_input_replacements"]["status"] == "provided"
    for name in ("seq2seq.TrainingHelper", "seq2seq.BasicDecoder", "seq2seq.python.ops.helper.Helper", "rnn.NASCell"):
        assert entries[f"tensorflow.contrib.{name}"]["status"] == "provided", name
    assert entries["tensorflow.contrib.seq2seq.sequence_loss"]["status"] == "provided with a difference"
    assert entries["npu_bridge.npu_cpu.npu_cpu_ops.embeddingrankid"]["status"] == "provided"
    assert entries["tensorflow.contrib.tensorrt.create_inference_graph"]["status"] == "accepted without effect"
    assert entries["tensorflow.tools.graph_transforms.TransformGraph"]["status"] == "provided"


# ---------------------------------------------------------------------------------------------------
# graph_editor, in-process

def _chain():
    a = tf.constant([1.0, 2.0], name="a")
    b = tf.identity(a * 2.0, name="b")
    c = tf.add(b, 1.0, name="c")
    return a, b, c


def test_walks_filters_and_regex_selection_follow_the_live_graph():
    with tf.Graph().as_default() as graph:
        a, b, c = _chain()
        backward = select.get_backward_walk_ops(c, inclusive=True)
        assert backward[0] is c.op and b.op in backward and a.op in backward
        assert a.op not in select.get_backward_walk_ops(c.op, stop_at_ts=[b])
        forward = select.get_forward_walk_ops(a, inclusive=False)
        assert c.op in forward and a.op not in forward
        assert select.get_forward_walk_ops([a.op], within_ops=[a.op, b.op.inputs[0].op]) == [
            a.op, b.op.inputs[0].op]
        assert [op.name for op in select.select_ops("^[bc]$", graph=graph)] == ["b", "c"]
        within = select.get_within_boundary_ops(graph, [b.op], boundary_ops=[a.op, c.op], inclusive=False)
        assert [op.name for op in within] == ["mul/y", "mul", "b"]  # stopped at a and c, both ways
        assert [t.name for t in select.filter_ts_from_regex(graph.get_operations(), "^c:")] == ["c:0"]
        assert select.select_ts("(?#ts)^a:", graph=graph) == [a]
        with pytest.raises(ValueError, match="needs a graph: pass graph="):
            select.select_ops("^b$")
        with pytest.raises(TypeError, match="expected tf.Operation items"):
            select.make_list_of_op([a])


def test_subgraph_view_boundary_and_errors():
    with tf.Graph().as_default():
        a, b, c = _chain()
        view = graph_editor_edit.make_view([b.op.inputs[0].op, b.op])
        assert [t.name for t in view.inputs] == ["a:0", "mul/y:0"]
        assert [t.name for t in view.outputs] == ["b:0"]
        assert view.consumers() == [c.op] and view.input_index(a) == 0
        with pytest.raises(ValueError, match="c:0 is not an output"):
            view.output_index(c)
        graph_editor_edit.add_control_inputs(c.op, [a.op])
        with pytest.raises(ValueError, match="a is already a control input of c"):
            graph_editor_edit.add_control_inputs(c.op, [a.op])
        graph_editor_edit.remove_control_inputs(c.op, [a.op])
        assert c.op.control_inputs == []
        with pytest.raises(TypeError, match="is int32 but b:0 is float32"):
            graph_editor_edit.reroute_ts([tf.constant([1, 2])], [b])


def test_copy_reroute_and_graph_replace_compute_what_they_say():
    with tf.Graph().as_default() as graph, V1.Session() as sess:
        a, b, c = _chain()
        ten = tf.constant([10.0, 20.0])
        view, info = graph_editor_copy.copy_with_input_replacements(graph_editor_edit.make_view([b.op.inputs[0].op,
                                                                                                  b.op, c.op]),
                                                                    {a: ten}, dst_scope="copy")
        copied_c = info.transformed(c)
        assert copied_c.name == "copy/c:0" and info.original(copied_c) is c and view.inputs[0] is ten
        assert sess.run(copied_c).tolist() == [21.0, 41.0] and sess.run(c).tolist() == [3.0, 5.0]
        _, again = graph_editor_copy.copy(c.op, dst_scope="copy")  # a scope of its own, as TF 1.15 made
        assert again.transformed(c).name == "copy_1/c:0"
        replaced = graph_editor_copy.graph_replace({"out": c}, {a: tf.constant([0.5, 1.0])})
        assert sess.run(replaced["out"]).tolist() == [2.0, 3.0]
        assert len({op.name for op in graph.get_operations()}) == len(graph.get_operations())
        moved = graph_editor_edit.reroute_ts([ten], [b])
    with V1.Session(graph=graph) as sess:  # a graph edited after a session ran it is read anew by a new session
        assert moved == 2 and sess.run(c).tolist() == [11.0, 21.0]  # c and its copy copy_1/c read b
    other = tf.Graph()
    with tf.Graph().as_default():
        a, b, c = _chain()
        view, info = graph_editor_copy.copy(graph_editor_edit.make_view([b.op, c.op]), dst_graph=other)
    assert [t.op.type for t in view.inputs] == ["Placeholder", "Placeholder"]  # mul:0 and c/y:0, from outside
    assert view.inputs[0] is info.transformed(b.op.inputs[0]) and view.inputs[0].graph is other
    with V1.Session(graph=other) as sess:
        feed = {view.inputs[0]: np.array([1.0, 2.0], np.float32), view.inputs[1]: 0.5}
        assert sess.run(info.transformed(c), feed).tolist() == [1.5, 2.5]


# ---------------------------------------------------------------------------------------------------
# NASCell

@pytest.mark.parametrize("num_proj,use_bias", [(None, False), (3, True)])
def test_nas_cell_computes_what_tensorflow_addons_nas_cell_computes(num_proj, use_bias):
    from npu_sim_bridge.tf1compat.rnn_cells import NASCell

    rng = np.random.RandomState(4)
    inputs = rng.rand(2, 5).astype(np.float32)
    c0, m0 = rng.rand(2, 4).astype(np.float32), rng.rand(2, num_proj or 4).astype(np.float32)
    with tf.Graph().as_default(), V1.Session() as sess:
        cell = NASCell(4, num_proj=num_proj, use_bias=use_bias)
        output, state = cell(tf.constant(inputs), V1.nn.rnn_cell.LSTMStateTuple(tf.constant(c0), tf.constant(m0)))
        sess.run(V1.global_variables_initializer())
        if use_bias:  # a non-zero bias, so that the test sees it
            sess.run(V1.assign(V1.global_variables("nas_cell/bias")[0], rng.rand(32).astype(np.float32)))
        ours = sess.run([output, state.c, state.h])
        weights = {v.op.name.split("/")[-1]: sess.run(v) for v in V1.global_variables()}
    assert set(weights) == {"kernel", "recurrent_kernel"} | ({"bias"} if use_bias else set()) | (
        {"projection_weights"} if num_proj else set())
    from tensorflow_addons.rnn import NASCell as AddonsNASCell

    with tf.Graph().as_default(), V1.Session() as sess:
        reference = AddonsNASCell(4, projection=num_proj, use_bias=use_bias)
        reference.build((None, 5))
        sess.run([V1.assign(variable, weights[variable.name.split("/")[-1].split(":")[0]])
                  for variable in reference.weights])
        want = sess.run(reference(tf.constant(inputs), [tf.constant(c0), tf.constant(m0)]))
    for got, expected in zip(ours, (want[0], *want[1])):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_cudnn_compatible_gru_cell_is_keras_gru_with_the_reset_gate_after_the_matmul():
    from npu_sim_bridge.tf1compat.rnn_cells import CudnnCompatibleGRUCell

    rng = np.random.RandomState(2)
    x, h = rng.rand(3, 4).astype(np.float32), rng.rand(3, 5).astype(np.float32)
    with tf.Graph().as_default(), V1.Session() as sess:
        cell = CudnnCompatibleGRUCell(5)
        ours, _ = cell(tf.constant(x), tf.constant(h))
        sess.run(V1.global_variables_initializer())
        for variable in V1.global_variables():  # non-zero biases, so that the test sees where each goes
            if variable.op.name.endswith("bias"):
                sess.run(V1.assign(variable, rng.rand(*variable.shape.as_list()).astype(np.float32)))
        ours = sess.run(ours)
        w = {v.op.name.split("cudnn_compatible_gru_cell/")[1]: sess.run(v) for v in V1.global_variables()}
    gates, gate_bias = w["gates/kernel"], w["gates/bias"]
    reset, update = slice(0, 5), slice(5, 10)
    kernel = np.concatenate([gates[:4, update], gates[:4, reset], w["candidate/input_projection/kernel"]], 1)
    recurrent = np.concatenate([gates[4:, update], gates[4:, reset], w["candidate/hidden_projection/kernel"]], 1)
    bias = np.stack([np.concatenate([gate_bias[update], gate_bias[reset], w["candidate/input_projection/bias"]]),
                     np.concatenate([np.zeros(10, np.float32), w["candidate/hidden_projection/bias"]])])
    with tf.Graph().as_default(), V1.Session() as sess:
        reference = tf.keras.layers.GRUCell(5, reset_after=True)
        reference.build((None, 4))
        sess.run([V1.assign(v, value) for v, value in zip(reference.weights, (kernel, recurrent, bias))])
        want = sess.run(reference(tf.constant(x), [tf.constant(h)])[0])
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-6)


def test_output_projection_wrapper_projects_the_cell_output_with_its_own_variables():
    from npu_sim_bridge.tf1compat.rnn_cells import OutputProjectionWrapper

    with tf.Graph().as_default(), V1.Session() as sess:
        inner = V1.nn.rnn_cell.GRUCell(3)
        cell = OutputProjectionWrapper(inner, 2, activation=tf.tanh)
        outputs, state = V1.nn.dynamic_rnn(cell, tf.ones([2, 4, 5]), dtype=tf.float32)
        sess.run(V1.global_variables_initializer())
        projected, last = sess.run([outputs, state])
        kernel, bias = (sess.run(V1.global_variables(f"rnn/output_projection_wrapper/{name}")[0])
                        for name in ("kernel", "bias"))
        names = sorted(v.op.name for v in V1.global_variables())
    assert names == ["rnn/output_projection_wrapper/bias", "rnn/output_projection_wrapper/gru_cell/candidate/bias",
                     "rnn/output_projection_wrapper/gru_cell/candidate/kernel",
                     "rnn/output_projection_wrapper/gru_cell/gates/bias",
                     "rnn/output_projection_wrapper/gru_cell/gates/kernel", "rnn/output_projection_wrapper/kernel"]
    assert projected.shape == (2, 4, 2) and last.shape == (2, 3)  # the state stays the inner cell's
    np.testing.assert_allclose(projected[:, -1], np.tanh(last @ kernel + bias), rtol=1e-5, atol=1e-6)
