"""The names of tf.contrib.summary, quantize, util, learn, image, opt and distributions on TensorFlow 2.15."""

import importlib
import warnings

import tensorflow as tf

from npu_sim_bridge.tf1compat.errors import TF1CompatWarning

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
# Small modules

def util_names():
    return {"constant_value": tf.get_static_value, "make_tensor_proto": tf.make_tensor_proto,
            "make_ndarray": tf.make_ndarray}


def learn_names():
    from npu_sim_bridge.tf1compat import mnist

    return {"ModeKeys": tf.estimator.ModeKeys, "RunConfig": _V1.estimator.RunConfig,
            "datasets": mnist.learn_datasets_module()}


def image_bases():
    try:
        addons = importlib.import_module("tensorflow_addons")
        if not tf.test.is_built_with_cuda():
            addons.options.disable_custom_kernel()  # its kernels link against CUDA: the Python ops on a CPU build
        return (importlib.import_module("tensorflow_addons.image"),)
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError("tf.contrib.image is provided by tensorflow-addons, which is not installed: "
                                  "pip install tensorflow-addons==0.23.0", name="tensorflow_addons") from error


def opt_names():
    from npu_sim_bridge.tf1compat import optimizers

    return {"LARSOptimizer": optimizers.LARSOptimizer, "LazyAdamOptimizer": optimizers.LazyAdamOptimizer}


def rnn_names():
    from npu_sim_bridge.tf1compat.rnn_cells import LayerNormBasicLSTMCell

    return {"LayerNormBasicLSTMCell": LayerNormBasicLSTMCell}


def framework_names():
    return {
        "get_or_create_global_step": _V1.train.get_or_create_global_step,
        "get_global_step": _V1.train.get_global_step, "nest": tf.nest, "is_tensor": tf.is_tensor,
        "list_variables": tf.train.list_variables, "load_variable": tf.train.load_variable,
        "load_checkpoint": tf.train.load_checkpoint, "init_from_checkpoint": _V1.train.init_from_checkpoint,
        "get_name_scope": lambda: _V1.get_default_graph().get_name_scope(),
    }
