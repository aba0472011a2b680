"""tf.contrib for TF1 scripts: the most used parts mapped onto TensorFlow 2.15; the rest name their replacement.

Mapped (names resolve to working objects):
  layers, slim       npu_sim_bridge.runtime.tf1_layers (contrib signatures, scopes and variable names)
  rnn                tf.compat.v1.nn.rnn_cell.* and tf.compat.v1.nn.static_rnn & co.
  data               tf.data.experimental.*
  training           HParams (a compatible class here)
  framework          arg_scope, add_arg_scope, get_or_create_global_step, get_variables_to_restore, nest, ...
  tpu                tf.compat.v1.estimator.tpu.* (TPUEstimator with use_tpu=False runs on CPU) and tf.compat.v1.tpu.*
  cluster_resolver   tf.distribute.cluster_resolver.*;  distribute: tf.compat.v1.distribute.*
  keras              tf.compat.v1.keras;  lookup: tf.compat.v1.lookup (HashTable -> StaticHashTable)
  mixed_precision    LossScaleOptimizer & managers -> npu_sim_bridge's loss scaling (same constructors)
Every other module of TensorFlow 1.15's tf.contrib imports (so an import the script never uses does not
stop it, with a TF1CompatWarning), and using any of its names raises TF1ContribError naming the name
and its replacement. A name TensorFlow 1.15's tf.contrib never had raises at once.
"""

import importlib
import json
import re
import sys
import types
import warnings

import tensorflow as tf

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.runtime.tf1 import TF1AttributeError

_V1 = tf.compat.v1


class TF1ContribError(TF1AttributeError, NpuSimError):
    """A tf.contrib name with no TensorFlow 2.15 equivalent in the simulator; the message says what to use."""


class TF1CompatWarning(UserWarning):
    """A TF1 script imported a part of tf.contrib that only fails once it is used."""


# contrib module -> what replaces it in TensorFlow 2 (modules with no entry have no direct replacement).
MODULE_REPLACEMENTS = {
    "crf": "tensorflow_addons.text (crf_log_likelihood, crf_decode, ...; pip install tensorflow-addons)",
    "seq2seq": "tensorflow_addons.seq2seq (pip install tensorflow-addons)",
    "legacy_seq2seq": "tensorflow_addons.seq2seq, or tf.keras layers",
    "image": "tf.image, or tensorflow_addons.image for rotate/transform/... (pip install tensorflow-addons)",
    "opt": "the tf.compat.v1.train optimizers, or tensorflow_addons.optimizers (AdamW, LazyAdam, ...) with Keras",
    "quantize": "tensorflow_model_optimization's quantization-aware training "
                "(pip install tensorflow-model-optimization)",
    "model_pruning": "tensorflow_model_optimization.sparsity (pip install tensorflow-model-optimization)",
    "summary": "tf.compat.v2.summary (create_file_writer, scalar, ...)",
    "learn": "tf.estimator (tf.compat.v1.estimator)",
    "estimator": "tf.estimator (tf.compat.v1.estimator)",
    "losses": "tf.compat.v1.losses (note: labels come before predictions there)",
    "metrics": "tf.compat.v1.metrics (streaming_X became tf.compat.v1.metrics.X)",
    "cudnn_rnn": "tf.keras.layers.LSTM / GRU, which use cuDNN kernels where they can",
    "distributions": "tf.compat.v1.distributions, or tensorflow_probability.distributions",
    "bayesflow": "tensorflow_probability",
    "signal": "tf.signal",
    "feature_column": "tf.feature_column (tf.compat.v1.feature_column)",
    "gan": "tensorflow_gan (pip install tensorflow-gan)",
    "tensorrt": "tf.experimental.tensorrt",
    "stateless": "tf.random.stateless_uniform / stateless_normal / ...",
    "checkpoint": "tf.train.Checkpoint",
    "predictor": "tf.compat.v1.saved_model.load, or tf.saved_model.load",
    "memory_stats": "tf.config.experimental.get_memory_info",
    "nn": "tf.nn",
    "eager": "TensorFlow 2's eager execution (run the script with `npu-sim run --tf2`)",
    "timeseries": "tf.keras models (tf.contrib.timeseries has no TensorFlow 2 port)",
    "compiler": "tf.function(jit_compile=True) (XLA)",
    "graph_editor": "no TensorFlow 2 equivalent: edit GraphDefs directly",
    "slim": "tf_slim (pip install tf-slim), which has the parts of slim the simulator does not map",
}

# TensorFlow 1.15's tf.contrib modules (the ones that are not mapped import as placeholders).
TF115_CONTRIB_MODULES = frozenset({
    "all_reduce", "autograph", "batching", "bayesflow", "bigtable", "boosted_trees", "checkpoint", "cloud",
    "cluster_resolver", "coder", "compiler", "constrained_optimization", "copy_graph", "crf", "cudnn_rnn", "data",
    "deprecated", "distribute", "distributions", "eager", "estimator", "factorization", "feature_column", "ffmpeg",
    "framework", "gan", "graph_editor", "grid_rnn", "image", "input_pipeline", "integrate", "keras",
    "kernel_methods", "labeled_tensor", "layers", "learn", "legacy_seq2seq", "linear_optimizer", "lookup", "losses",
    "memory_stats", "metrics", "mixed_precision", "model_pruning", "nccl", "nn", "opt", "optimizer_v2",
    "periodic_resample", "predictor", "proto", "quantization", "quantize", "rate", "receptive_field", "recurrent",
    "reduce_slice_ops", "remote_fused_graph", "resampler", "rnn", "rpc", "saved_model", "seq2seq", "signal", "slim",
    "solvers", "sparsemax", "specs", "staging", "stat_summarizer", "stateless", "summary", "tensor_forest",
    "tensorboard", "tensorrt", "testing", "text", "tfprof", "timeseries", "tpu", "training", "util",
})

# Names of mapped modules that have no equivalent, with what to write instead.
SYMBOL_REPLACEMENTS = {
    "data.batch_and_drop_remainder": "dataset.batch(batch_size, drop_remainder=True)",
    "data.padded_batch_and_drop_remainder": "dataset.padded_batch(..., drop_remainder=True)",
    "data.sliding_window_batch": "dataset.window(size, shift).flat_map(...)",
    "layers.optimize_loss": "optimizer.minimize(loss, global_step=...) with a tf.compat.v1.train optimizer",
    "layers.embed_sequence": "tf.compat.v1.get_variable + tf.nn.embedding_lookup, or tf.keras.layers.Embedding",
    "rnn.LayerNormBasicLSTMCell": "tensorflow_addons.rnn.LayerNormLSTMCell",
    "rnn.AttentionCellWrapper": "tensorflow_addons.seq2seq.AttentionWrapper",
    "rnn.stack_bidirectional_dynamic_rnn": "a loop of tf.compat.v1.nn.bidirectional_dynamic_rnn calls",
    "slim.nets": "tf_slim.nets (pip install tf-slim), or tf.keras.applications",
    "training.bucket_by_sequence_length": "tf.data.experimental.bucket_by_sequence_length",
}

# Deep module paths of TensorFlow 1.15 contrib that still exist in TensorFlow 2.15 under another name.
DEEP_MODULES = {
    "tpu.python.tpu.tpu_config": "tensorflow_estimator.python.estimator.tpu.tpu_config",
    "tpu.python.tpu.tpu_estimator": "tensorflow_estimator.python.estimator.tpu.tpu_estimator",
    "tpu.python.tpu.tpu_optimizer": "tensorflow.python.tpu.tpu_optimizer",
    "tpu.python.tpu.async_checkpoint": "tensorflow.python.tpu.async_checkpoint",
}


def _missing_message(qualified, replacement):
    base = f"tf.contrib.{qualified} is not available: tf.contrib was removed in TensorFlow 2"
    if replacement:
        return f"{base}; use {replacement} instead (change this line of the script)"
    return (f"{base} and has no direct equivalent that npu_sim_bridge maps; rewrite this part of the script "
            "with TensorFlow 2.15 APIs, or run the part that needs it elsewhere")


class ContribModule(types.ModuleType):
    """tensorflow.contrib.<name>: fixed names first, then the attributes of `bases`, else TF1ContribError."""

    def __init__(self, short_name, names=None, bases=(), doc=None):
        super().__init__(f"tensorflow.contrib.{short_name}", doc)
        self.__dict__["_npu_sim_short_name"] = short_name
        self.__dict__["_npu_sim_bases"] = tuple(bases)
        self.__dict__.update(names or {})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        for base in self.__dict__["_npu_sim_bases"]:
            if hasattr(base, name):
                return getattr(base, name)
        short_name = self.__dict__["_npu_sim_short_name"]
        qualified = f"{short_name}.{name}"
        replacement = SYMBOL_REPLACEMENTS.get(qualified) or MODULE_REPLACEMENTS.get(short_name)
        raise TF1ContribError(_missing_message(qualified, replacement))

    def __dir__(self):
        names = {name for name in self.__dict__ if not name.startswith("_")}
        for base in self.__dict__["_npu_sim_bases"]:
            names.update(name for name in dir(base) if not name.startswith("_"))
        return sorted(names)


# ---------------------------------------------------------------------------------------------------
# HParams (tf.contrib.training.HParams)

_PARAM_RE = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>\[[^\]]*\]|[^,\[]*)\s*(?:,|$)")


def _convert(name, kind, text):
    text = text.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise ValueError(f"HParams: could not parse {text!r} as a bool for hyperparameter {name!r} (true/false)")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"HParams: could not parse {text!r} as {kind.__name__} for hyperparameter {name!r}") from None


class HParams:
    """tf.contrib.training.HParams: named hyperparameters with fixed types, `parse("a=1,b=[1,2]")`, JSON, values()."""

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        if hparam_def is not None:
            raise ValueError("HParams(hparam_def=...) (a HParamDef proto) is not supported; pass keyword arguments")
        self._hparam_types = {}
        self._model_structure = model_structure
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        """Add hyperparameter `name` with `value` (its type, or its items' type for a list, is fixed)."""
        if getattr(self, name, None) is not None:
            raise ValueError(f"HParams: hyperparameter name {name!r} is reserved or already exists")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"HParams: multi-valued hyperparameter {name!r} needs at least one value")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name, value):
        """Set an existing hyperparameter, converting ints to floats where the type is float."""
        if name not in self._hparam_types:
            raise KeyError(f"HParams: unknown hyperparameter {name!r}; add it with add_hparam first")
        kind, is_list = self._hparam_types[name]
        if is_list:
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"HParams: hyperparameter {name!r} is a list of {kind.__name__}, got {value!r}")
            setattr(self, name, [self._cast(name, kind, item) for item in value])
        else:
            if isinstance(value, (list, tuple)):
                raise ValueError(f"HParams: hyperparameter {name!r} is a single {kind.__name__}, "
                                 f"got the list {value!r}")
            setattr(self, name, self._cast(name, kind, value))

    @staticmethod
    def _cast(name, kind, value):
        if value is None or isinstance(value, kind) or kind is type(None):
            return value
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"HParams: hyperparameter {name!r} is of type {kind.__name__}, got {value!r}")

    def del_hparam(self, name):
        """Remove a hyperparameter."""
        if name in self._hparam_types:
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values):
        """Override values from a string "name=value,list=[1,2],..."; returns self."""
        position = 0
        values = values.strip()
        while position < len(values):
            match = _PARAM_RE.match(values, position)
            if match is None or match.end() == position:
                raise ValueError(f"HParams: could not parse {values[position:]!r}; expected name=value pairs "
                                 "separated by commas")
            position = match.end()
            name, text = match.group("name"), match.group("value")
            if name not in self._hparam_types:
                raise ValueError(f"HParams: unknown hyperparameter {name!r} in {values!r}")
            kind, is_list = self._hparam_types[name]
            if is_list:
                items = [item for item in text.strip().strip("[]").split(",") if item.strip()]
                self.set_hparam(name, [_convert(name, kind, item) for item in items])
            else:
                self.set_hparam(name, _convert(name, kind, text))
        return self

    def override_from_dict(self, values_dict):
        """Set every hyperparameter named in `values_dict`; returns self."""
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def values(self):
        """{name: value} of every hyperparameter."""
        return {name: getattr(self, name) for name in self._hparam_types}

    def to_json(self, indent=None, separators=None, sort_keys=False):
        """The hyperparameters as a JSON object."""
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json):
        """Override values from a JSON object; returns self."""
        return self.override_from_dict(json.loads(values_json))

    def get(self, key, default=None):
        """The value of `key`, or `default` when there is no such hyperparameter."""
        return getattr(self, key) if key in self._hparam_types else default

    def set_model_structure(self, model_structure):
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def __contains__(self, key):
        return key in self._hparam_types

    def __str__(self):
        return str(sorted(self.values().items()))

    def __repr__(self):
        return f"{type(self).__name__}({self.__str__()})"


# ---------------------------------------------------------------------------------------------------
# The mapped modules

def _layers_names(layers):
    return {name: getattr(layers, name) for name in (
        "fully_connected", "conv2d", "convolution2d", "max_pool2d", "avg_pool2d", "flatten", "dropout", "batch_norm",
        "layer_norm", "repeat", "l1_regularizer", "l2_regularizer", "xavier_initializer", "xavier_initializer_conv2d",
        "variance_scaling_initializer")}


def _build_layers():
    from npu_sim_bridge.runtime import tf1_layers

    return ContribModule("layers", _layers_names(tf1_layers), bases=(), doc=tf1_layers.__doc__)


def _build_slim():
    from npu_sim_bridge.runtime import tf1_layers

    names = _layers_names(tf1_layers)
    names.update(
        arg_scope=tf1_layers.arg_scope, add_arg_scope=tf1_layers.add_arg_scope, losses=_V1.losses,
        get_variables=tf1_layers.get_variables, get_model_variables=tf1_layers.get_model_variables,
        get_variables_to_restore=tf1_layers.get_variables_to_restore,
        initializers=ContribModule("slim.initializers", {
            "xavier_initializer": tf1_layers.xavier_initializer,
            "xavier_initializer_conv2d": tf1_layers.xavier_initializer_conv2d,
            "variance_scaling_initializer": tf1_layers.variance_scaling_initializer}),
        regularizers=ContribModule("slim.regularizers", {
            "l1_regularizer": tf1_layers.l1_regularizer, "l2_regularizer": tf1_layers.l2_regularizer}),
    )
    return ContribModule("slim", names, doc="tf.contrib.slim basics: " + (tf1_layers.__doc__ or ""))


def _build_framework():
    from npu_sim_bridge.runtime import tf1_layers

    return ContribModule("framework", {
        "arg_scope": tf1_layers.arg_scope, "add_arg_scope": tf1_layers.add_arg_scope,
        "get_variables": tf1_layers.get_variables, "get_model_variables": tf1_layers.get_model_variables,
        "get_variables_to_restore": tf1_layers.get_variables_to_restore,
        "get_or_create_global_step": _V1.train.get_or_create_global_step,
        "get_global_step": _V1.train.get_global_step, "nest": tf.nest, "is_tensor": tf.is_tensor,
    })


def _build_mixed_precision():
    from npu_sim_bridge.runtime import loss_scale

    return ContribModule("mixed_precision", {
        "LossScaleOptimizer": loss_scale.NPULossScaleOptimizer,
        "FixedLossScaleManager": loss_scale.FixedLossScaleManager,
        "ExponentialUpdateLossScaleManager": loss_scale.ExponentialUpdateLossScaleManager,
        "LossScaleManager": loss_scale.LossScaleManager,
    })


_BUILDERS = {
    "layers": _build_layers,
    "slim": _build_slim,
    "framework": _build_framework,
    "mixed_precision": _build_mixed_precision,
    "rnn": lambda: ContribModule("rnn", bases=(_V1.nn.rnn_cell, _V1.nn),
                                 doc="tf.compat.v1.nn.rnn_cell, tf.compat.v1.nn"),
    "data": lambda: ContribModule("data", bases=(tf.data.experimental,), doc="tf.data.experimental"),
    "training": lambda: ContribModule("training", {"HParams": HParams}),
    "tpu": lambda: ContribModule("tpu", bases=(_V1.estimator.tpu, _V1.tpu),
                                 doc="tf.compat.v1.estimator.tpu, tf.compat.v1.tpu"),
    "cluster_resolver": lambda: ContribModule("cluster_resolver", bases=(tf.distribute.cluster_resolver,)),
    "distribute": lambda: ContribModule("distribute", bases=(_V1.distribute,)),
    "keras": lambda: ContribModule("keras", bases=(_V1.keras,)),
    "lookup": lambda: ContribModule("lookup", {
        "HashTable": _V1.lookup.StaticHashTable,
        "MutableHashTable": tf.lookup.experimental.MutableHashTable,
        "MutableDenseHashTable": tf.lookup.experimental.DenseHashTable,
    }, bases=(_V1.lookup,)),
}


def _caller_stacklevel():
    """The warnings stacklevel of the first frame outside the TF1 plumbing and importlib (the script's line)."""
    from npu_sim_bridge.runtime.tf1 import PLUMBING_FILES

    frame, level = sys._getframe(2), 2  # pylint: disable=protected-access  (1: our caller, __getattr__)
    while frame is not None and (frame.f_code.co_filename in PLUMBING_FILES
                                 or frame.f_code.co_filename.startswith("<frozen ")):
        frame, level = frame.f_back, level + 1
    return level


class Contrib(types.ModuleType):
    """tensorflow.contrib as a TF1 script sees it (see the module docstring)."""

    def __init__(self):
        super().__init__("tensorflow.contrib", __doc__)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _BUILDERS:
            module = _BUILDERS[name]()
        elif name in TF115_CONTRIB_MODULES:
            replacement = MODULE_REPLACEMENTS.get(name)
            warnings.warn(f"tf.contrib.{name} is not available on TensorFlow 2 ("
                          f"{'use ' + replacement if replacement else 'no direct replacement'}); "
                          "the script goes on, but using any of its names will fail", TF1CompatWarning,
                          stacklevel=_caller_stacklevel())
            module = ContribModule(name, doc=_missing_message(name, replacement))
        else:
            raise TF1ContribError(f"module 'tensorflow.contrib' has no attribute {name!r}: TensorFlow 1.15's "
                                  f"tf.contrib had no module {name!r} either; check the spelling")
        self.__dict__[name] = module
        return module

    def __dir__(self):
        return sorted(TF115_CONTRIB_MODULES | set(self.__dict__))


_contrib = None


def contrib_module():
    """The tensorflow.contrib module object (one per process)."""
    global _contrib
    if _contrib is None:
        _contrib = Contrib()
    return _contrib


def import_contrib(parts):
    """The module `import tensorflow.contrib.<parts>` gives, or ModuleNotFoundError naming it and what to use."""
    dotted = ".".join(parts)
    if dotted in DEEP_MODULES:
        return importlib.import_module(DEEP_MODULES[dotted])
    current = contrib_module()
    for index, part in enumerate(parts):
        try:
            current = getattr(current, part)
        except TF1ContribError as error:
            name = "tensorflow.contrib." + ".".join(parts[:index + 1])
            raise ModuleNotFoundError(f"No module named {name!r}: {error}", name=name) from None
        if not isinstance(current, types.ModuleType):
            name = "tensorflow.contrib." + ".".join(parts[:index + 1])
            raise ModuleNotFoundError(f"No module named {name!r}: tf.contrib.{'.'.join(parts[:index + 1])} is not a "
                                      "module", name=name)
    return current

