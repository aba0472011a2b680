"""The names of tf.contrib.summary, quantize, tensorrt, util, learn, image, opt and distributions on TensorFlow 2.15."""

import importlib
import warnings

import numpy as np

import tensorflow as tf

from npu_sim_bridge.tf1compat.errors import TF1CompatWarning
from npu_sim_bridge.tf1compat.python_view import python_view

_V1 = tf.compat.v1
_V2 = tf.compat.v2

# ---------------------------------------------------------------------------------------------------
# tf.contrib.summary: TensorFlow 2's summary ops in a TF1 graph (what tf.contrib.summary became).


def _step(step):
    return _V1.train.get_or_create_global_step() if step is None else step


def _summary(kind):
    def write(name, tensor, family=None, step=None, **kwargs):
        tag = f"{family}/{name}" if family else name
        return getattr(_V2.summary, kind)(tag, tensor, step=_step(step), **kwargs)

    write.__name__ = kind
    write.__doc__ = f"tf.contrib.summary.{kind}: tf.compat.v2.summary.{kind}, the step defaulting to the global step."
    return write


def create_file_writer(logdir, max_queue=None, flush_millis=None, filename_suffix=None, name=None):
    """tf.contrib.summary.create_file_writer: a tf.compat.v2.summary file writer (initialize() starts it)."""
    return _V2.summary.create_file_writer(logdir, max_queue=max_queue, flush_millis=flush_millis,
                                          filename_suffix=filename_suffix, name=name)


def always_record_summaries():
    """Record the summaries created in this block at every step."""
    return _V2.summary.record_if(True)


def never_record_summaries():
    """Record none of the summaries created in this block."""
    return _V2.summary.record_if(False)


def record_summaries_every_n_global_steps(n, global_step=None):
    """Record the summaries created in this block when the global step is a multiple of n."""
    step = _step(global_step)
    return _V2.summary.record_if(tf.equal(step % n, 0))


def summary_names():
    names = {kind: _summary(kind) for kind in ("scalar", "histogram", "image", "audio", "text")}
    names.update(
        create_file_writer=create_file_writer, always_record_summaries=always_record_summaries,
        never_record_summaries=never_record_summaries,
        record_summaries_every_n_global_steps=record_summaries_every_n_global_steps,
        all_summary_ops=_V1.summary.all_v2_summary_ops, initialize=_V1.summary.initialize,
        flush=_V2.summary.flush, create_summary_file_writer=create_file_writer)
    return names


# ---------------------------------------------------------------------------------------------------
# tf.contrib.quantize: accepted without effect (the NPU quantizes with its own tools, not fake-quant nodes).

_warned = set()


def _no_effect(name, what):
    def accept(*args, **kwargs):  # pylint: disable=unused-argument
        if name not in _warned:
            _warned.add(name)
            warnings.warn(f"tf.contrib.quantize.{name} is accepted without effect: {what}", TF1CompatWarning,
                          stacklevel=2)

    accept.__name__ = name
    accept.__doc__ = f"tf.contrib.quantize.{name}, accepted without effect: {what}."
    return accept


QUANTIZE_NO_EFFECT = ("no fake-quantization nodes are added; the graph trains and evaluates in float "
                      "(TensorFlow 2 does quantization-aware training with tensorflow-model-optimization)")


def quantize_names():
    return {name: _no_effect(name, QUANTIZE_NO_EFFECT) for name in (
        "create_training_graph", "create_eval_graph", "experimental_create_training_graph",
        "experimental_create_eval_graph")}


# ---------------------------------------------------------------------------------------------------
# tf.contrib.tensorrt: accepted without effect (no TensorRT in a simulation: the graph stays as it is).

TENSORRT_NO_EFFECT = ("no TensorRT engines are built (the simulator has no TensorRT): the graph is returned "
                      "unchanged and runs with TensorFlow's own kernels")


def create_inference_graph(input_graph_def, outputs, max_batch_size=1, max_workspace_size_bytes=2 << 20,
                           precision_mode="FP32", minimum_segment_size=3, is_dynamic_op=False,
                           maximum_cached_engines=1, cached_engine_batches=None, use_calibration=True,
                           input_saved_model_dir=None, input_saved_model_tags=None,
                           input_saved_model_signature_key=None, output_saved_model_dir=None, session_config=None):
    """tf.contrib.tensorrt.create_inference_graph, accepted without effect: the input GraphDef (or the SavedModel's
    graph, copied to output_saved_model_dir when given) comes back unchanged."""
    del outputs, max_batch_size, max_workspace_size_bytes, minimum_segment_size, is_dynamic_op
    del maximum_cached_engines, cached_engine_batches, use_calibration, input_saved_model_signature_key
    del session_config
    if str(precision_mode).upper() not in ("FP32", "FP16", "INT8"):
        raise ValueError(f"create_inference_graph: precision_mode {precision_mode!r} is invalid, it should be one of: "
                         "FP32, FP16, INT8")
    _tensorrt_warn("create_inference_graph")
    if input_graph_def is not None:
        result = _V1.GraphDef()
        result.CopyFrom(input_graph_def)
        return result
    if input_saved_model_dir is None:
        raise ValueError("create_inference_graph: pass input_graph_def, or input_saved_model_dir")
    from tensorflow.python.tools import saved_model_utils

    tags = ",".join(input_saved_model_tags or [tf.saved_model.SERVING])
    graph_def = saved_model_utils.get_meta_graph_def(input_saved_model_dir, tags).graph_def
    if output_saved_model_dir is not None:
        import shutil

        shutil.copytree(input_saved_model_dir, output_saved_model_dir)
    return graph_def


def calib_graph_to_infer_graph(calibration_graph_def, is_dynamic_op=False):
    """tf.contrib.tensorrt.calib_graph_to_infer_graph, accepted without effect: the GraphDef comes back unchanged."""
    del is_dynamic_op
    _tensorrt_warn("calib_graph_to_infer_graph")
    result = _V1.GraphDef()
    result.CopyFrom(calibration_graph_def)
    return result


def _tensorrt_warn(name):
    if f"tensorrt.{name}" not in _warned:
        _warned.add(f"tensorrt.{name}")
        warnings.warn(f"tf.contrib.tensorrt.{name} is accepted without effect: {TENSORRT_NO_EFFECT}",
                      TF1CompatWarning, stacklevel=3)


create_inference_graph.__npu_sim_no_effect__ = TENSORRT_NO_EFFECT
calib_graph_to_infer_graph.__npu_sim_no_effect__ = TENSORRT_NO_EFFECT


def tensorrt_names():
    return {"create_inference_graph": create_inference_graph,
            "calib_graph_to_infer_graph": calib_graph_to_infer_graph}


# ---------------------------------------------------------------------------------------------------
# Small modules

def util_names():
    return {"constant_value": tf.get_static_value, "make_tensor_proto": tf.make_tensor_proto,
            "make_ndarray": tf.make_ndarray}


class LearnModeKeys:
    """tf.contrib.learn.ModeKeys: TRAIN, EVAL and INFER (tf.estimator calls the last PREDICT)."""

    TRAIN = "train"
    EVAL = "eval"
    INFER = "infer"


def learn_names():
    from npu_sim_bridge.tf1compat import mnist

    return {"ModeKeys": LearnModeKeys, "RunConfig": _V1.estimator.RunConfig, "datasets": mnist.learn_datasets_module()}


def image_bases():
    return (_addons("tensorflow_addons.image"),)


def opt_names():
    from npu_sim_bridge.tf1compat import optimizers

    from npu_sim_bridge.tf1compat.scipy_optimizer import ScipyOptimizerInterface

    return {"ScipyOptimizerInterface": ScipyOptimizerInterface, **{name: getattr(optimizers, name) for name in (
        "LARSOptimizer", "LazyAdamOptimizer", "NadamOptimizer", "AdamWOptimizer", "MomentumWOptimizer",
        "MovingAverageOptimizer")}}


def rnn_names():
    from npu_sim_bridge.tf1compat import rnn_cells

    return {name: getattr(rnn_cells, name) for name in (
        "LayerNormBasicLSTMCell", "LSTMBlockCell", "NASCell", "OutputProjectionWrapper",
        "stack_bidirectional_dynamic_rnn")}


def framework_names():
    return {
        "get_or_create_global_step": _V1.train.get_or_create_global_step,
        "get_global_step": _V1.train.get_global_step, "nest": tf.nest, "is_tensor": tf.is_tensor,
        "list_variables": tf.train.list_variables, "load_variable": tf.train.load_variable,
        "load_checkpoint": tf.train.load_checkpoint, "init_from_checkpoint": _V1.train.init_from_checkpoint,
        "get_name_scope": lambda: _V1.get_default_graph().get_name_scope(),
        "nest": python_view(importlib.import_module("tensorflow.python.util.nest")),  # keeps is_sequence
        "smart_cond": importlib.import_module("tensorflow.python.framework.smart_cond").smart_cond,
        "sort": tf.sort, "argsort": tf.argsort,
    }


def _addons(module_name):
    """A tensorflow_addons module, its CUDA-linked kernels off on a CPU build of TensorFlow, its end-of-life notice
    silenced (tf1compat chose it, not the script)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            addons = importlib.import_module("tensorflow_addons")
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError("this tf.contrib module is provided by tensorflow-addons, which is not installed: "
                                  "pip install tensorflow-addons==0.23.0", name="tensorflow_addons") from error
    if not tf.test.is_built_with_cuda():
        addons.options.disable_custom_kernel()
    return importlib.import_module(module_name)


def embed_sequence(ids, vocab_size=None, embed_dim=None, unique=False, initializer=None, regularizer=None,
                   trainable=True, scope=None, reuse=None):
    """tf.contrib.layers.embed_sequence: a [vocab_size, embed_dim] `EmbedSequence/embeddings` table, looked up."""
    if vocab_size is None or embed_dim is None:
        raise ValueError("embed_sequence: vocab_size and embed_dim are required")
    with _V1.variable_scope(scope, "EmbedSequence", [ids], reuse=reuse):
        embeddings = _V1.get_variable("embeddings", [vocab_size, embed_dim], initializer=initializer,
                                      regularizer=regularizer, trainable=trainable)
        if unique:
            values, positions = tf.unique(tf.reshape(ids, [-1]))
            looked_up = tf.gather(tf.nn.embedding_lookup(embeddings, values), positions)
            return tf.reshape(looked_up, tf.concat([tf.shape(ids), [embed_dim]], 0))
        return tf.nn.embedding_lookup(embeddings, ids)


def batch_and_drop_remainder(batch_size):
    """tf.contrib.data.batch_and_drop_remainder: for dataset.apply, batches without the short last one."""
    return lambda dataset: dataset.batch(batch_size, drop_remainder=True)


def padded_batch_and_drop_remainder(batch_size, padded_shapes, padding_values=None):
    """tf.contrib.data.padded_batch_and_drop_remainder: for dataset.apply."""
    return lambda dataset: dataset.padded_batch(batch_size, padded_shapes, padding_values, drop_remainder=True)


def conv1d_transpose(value, filter, output_shape, stride, padding="SAME", data_format="NWC",  # noqa: A002
                     name=None):  # pylint: disable=redefined-builtin
    """tf.contrib.nn.conv1d_transpose (value, filter, stride) as tf.nn.conv1d_transpose."""
    return tf.nn.conv1d_transpose(value, filter, output_shape, stride, padding=padding, data_format=data_format,
                                  name=name)


def percentile(x, q, axis=None, interpolation=None, keep_dims=False, validate_args=False, name=None):
    """tf.contrib.distributions.percentile: the q-th percentile of x over axis (all axes by default).

    interpolation: 'nearest' (default), 'lower', 'higher', 'midpoint' or 'linear', as numpy.percentile.
    """
    del validate_args
    interpolation = interpolation or "nearest"
    if interpolation not in ("nearest", "lower", "higher", "midpoint", "linear"):
        raise ValueError(f"percentile: interpolation {interpolation!r} is invalid, it should be one of: "
                         "nearest, lower, higher, midpoint, linear")
    with tf.name_scope(name or "percentile"):
        x = tf.convert_to_tensor(x)
        rank = x.shape.rank
        axes = list(range(rank)) if axis is None else sorted(a % rank for a in np.atleast_1d(axis).tolist())
        kept = [a for a in range(rank) if a not in axes]
        moved = tf.transpose(x, kept + axes)
        flat = tf.reshape(moved, tf.concat([tf.shape(moved)[:len(kept)], [-1]], 0))
        ordered = tf.sort(flat, axis=-1)
        count = tf.cast(tf.shape(ordered)[-1], tf.float64)
        position = tf.cast(q, tf.float64) / 100.0 * (count - 1.0)
        low, high = tf.floor(position), tf.math.ceil(position)
        pick = {"nearest": tf.round(position), "lower": low, "higher": high}
        if interpolation in pick:
            result = tf.gather(ordered, tf.cast(pick[interpolation], tf.int32), axis=-1)
        else:
            below = tf.gather(ordered, tf.cast(low, tf.int32), axis=-1)
            above = tf.gather(ordered, tf.cast(high, tf.int32), axis=-1)
            weight = 0.5 if interpolation == "midpoint" else tf.cast(position - low, x.dtype)
            result = below + (above - below) * weight
        if keep_dims:
            shape = [1 if a in axes else tf.shape(x)[a] for a in range(rank)]
            result = tf.reshape(result, shape)
        return result


def small_module_names():
    """Modules of a few names each: {contrib module: {name: value}}."""
    from tensorflow.python.ops import data_flow_ops, lookup_ops
    from tensorflow.python.tpu import async_checkpoint
    from tensorflow_estimator.python.estimator.inputs.queues import feeding_queue_runner

    from npu_sim_bridge.tf1compat import legacy_seq2seq

    return {
        "data": {"batch_and_drop_remainder": batch_and_drop_remainder,
                 "padded_batch_and_drop_remainder": padded_batch_and_drop_remainder},
        "metrics": {"confusion_matrix": tf.math.confusion_matrix},
        "lookup": {"HashTable": _V1.lookup.StaticHashTable,
                   "MutableHashTable": tf.lookup.experimental.MutableHashTable,
                   "MutableDenseHashTable": tf.lookup.experimental.DenseHashTable,
                   **{name: getattr(lookup_ops, name) for name in (
                       "index_table_from_tensor", "index_table_from_file", "index_to_string_table_from_tensor",
                       "index_to_string_table_from_file", "string_to_index", "index_to_string")
                      if hasattr(lookup_ops, name)}},
        "stateless": {"stateless_random_uniform": tf.random.stateless_uniform,
                      "stateless_random_normal": tf.random.stateless_normal,
                      "stateless_truncated_normal": tf.random.stateless_truncated_normal,
                      "stateless_multinomial": _V1.random.stateless_multinomial},
        "nn": {"conv1d_transpose": conv1d_transpose},
        "tpu": {"AsyncCheckpointSaverHook": async_checkpoint.AsyncCheckpointSaverHook},
        "distributions": {"percentile": percentile},
        "layers": {"embed_sequence": embed_sequence},
        "slim": {"embed_sequence": embed_sequence,
                 "variable_scope": python_view(importlib.import_module("tensorflow.python.ops.variable_scope"))},
        "training": {"FeedingQueueRunner": feeding_queue_runner._FeedingQueueRunner},  # pylint: disable=W0212
        "staging": {"StagingArea": data_flow_ops.StagingArea},
        "legacy_seq2seq": {name: getattr(legacy_seq2seq, name) for name in (
            "rnn_decoder", "attention_decoder", "sequence_loss", "sequence_loss_by_example")},
    }


def crf_bases():
    return (_addons("tensorflow_addons.text"),)


def seq2seq_bases():
    return (_addons("tensorflow_addons.seq2seq"),)


def sparsemax_names():
    return {"sparsemax": _addons("tensorflow_addons.activations").sparsemax}


def resampler_names():
    return {"resampler": _addons("tensorflow_addons.image").resampler}
