"""tf.contrib for TF1 scripts: modules mapped onto TensorFlow 2.15 and maintained libraries; the rest say what to use.

Mapped (names resolve to working objects; each module's table below says onto what):
  slim, layers       the tf-slim package (slim.py), with TensorFlow 1.15's scopes and variable names
  framework          tf_slim's arg_scope and variable helpers, checkpoint readers, nest
  rnn                tf.compat.v1.nn.rnn_cell.* and tf.compat.v1.nn.static_rnn & co.
  data               tf.data.experimental.*
  training, metrics  HParams (hparams.py); tf_slim's training loop, evaluation and metrics
  image              tensorflow_addons.image (rotate, transform, translate, ...)
  opt                LARSOptimizer, LazyAdamOptimizer (optimizers.py)
  summary            tf.compat.v2.summary ops in the TF1 graph;  quantize, tensorrt: accepted without effect
  all_reduce         one reduced tensor per device in the TF1 graph (all_reduce.py)
  util, learn        constant_value & co.; learn: Experiment, learn_runner, export strategies, VocabularyProcessor
                     (learn.py), ModeKeys, learn.datasets.mnist (mnist.py)
  tpu                tf.compat.v1.estimator.tpu.* (TPUEstimator with use_tpu=False runs on CPU) and tf.compat.v1.tpu.*
  cluster_resolver   tf.distribute.cluster_resolver.*;  distribute: tf.compat.v1.distribute.*
  keras              tf.compat.v1.keras;  lookup: tf.compat.v1.lookup (HashTable -> StaticHashTable)
  distributions      tf.compat.v1.distributions, percentile;  losses: tf_slim.losses
  crf, seq2seq       tensorflow_addons.text / .seq2seq (seq2seq's TF1 Helpers, BasicDecoder, dynamic_decode:
                     seq2seq.py);  sparsemax, resampler: tensorflow_addons
  graph_editor       walks, selection, SubGraphView, rerouting and copying on the live graph (graph_editor*.py)
  model_pruning      magnitude pruning: apply_mask, Pruning's scheduled mask updates (model_pruning.py)
  data, lookup, nn, stateless  their TensorFlow 2.15 names (contrib_more.small_module_names)
  (more)             register_module() adds one (npu_sim_bridge registers mixed_precision: its loss scaling)
Every other module of TensorFlow 1.15's tf.contrib imports (so an import the script never uses does not
stop it, with a TF1CompatWarning), and using any of its names raises TF1ContribError naming the name
and its replacement. A name TensorFlow 1.15's tf.contrib never had raises at once.
"""

import importlib
import sys
import types
import warnings

import tensorflow as tf

from npu_sim_bridge.graph.attr_names import CONTRIB_BASES_KEY, CONTRIB_SHORT_NAME_KEY
from npu_sim_bridge.tf1compat import (all_reduce, contrib_estimator, contrib_misc, contrib_more, contrib_paths,
                                     graph_matcher, rnn_more, seq2seq, slim)
from npu_sim_bridge.tf1compat.errors import TF1CompatWarning, TF1ContribError
from npu_sim_bridge.tf1compat.hparams import HParams
from npu_sim_bridge.tf1compat.plumbing import PLUMBING_FILES

_V1 = tf.compat.v1

# contrib module -> what replaces it in TensorFlow 2 (modules with no entry have no direct replacement).
MODULE_REPLACEMENTS = {
    "legacy_seq2seq": "tensorflow_addons.seq2seq, or tf.keras layers",
    "model_pruning": "tensorflow_model_optimization.sparsity (pip install tensorflow-model-optimization)",
    "estimator": "tf.estimator (tf.compat.v1.estimator)",
    "cudnn_rnn": "tf.keras.layers.LSTM / GRU, which use cuDNN kernels where they can",
    "tfprof": "tf.compat.v1.profiler",
    "bayesflow": "tensorflow_probability",
    "signal": "tf.signal",
    "feature_column": "tf.feature_column (tf.compat.v1.feature_column)",
    "gan": "tensorflow_gan (pip install tensorflow-gan)",
    "tensorrt": "tf.experimental.tensorrt",
    "checkpoint": "tf.train.Checkpoint",
    "predictor": "tf.compat.v1.saved_model.load, or tf.saved_model.load",
    "memory_stats": "tf.config.experimental.get_memory_info",
    "eager": "TensorFlow 2's eager execution (run the script with `npu-sim run --tf2`)",
    "timeseries": "tf.keras models (tf.contrib.timeseries has no TensorFlow 2 port)",
    "compiler": "tf.function(jit_compile=True) (XLA)",
    "learn": "tf.estimator (tf.compat.v1.estimator)",
    **dict.fromkeys(("cloud", "bigtable"), "the google-cloud-bigtable client outside the graph, feeding tf.data "
                                           "(no Cloud Bigtable is reachable from the simulation)"),
    "opt": "the tf.compat.v1.train optimizers, or tensorflow_addons.optimizers with Keras",
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
    "data.sliding_window_batch": "dataset.window(size, shift).flat_map(...)",
    "rnn.AttentionCellWrapper": "tensorflow_addons.seq2seq.AttentionWrapper",
    **{f"estimator.boosted_trees_{kind}_train_in_memory":
       "tensorflow_decision_forests (TensorFlow 2.15's estimator package has no boosted trees any more)"
       for kind in ("classifier", "regressor")},
}

# Deep module paths of TensorFlow 1.15 contrib -> the module that holds them now.
DEEP_MODULES = dict(slim.DEEP_MODULES, **{
    "tpu.python.tpu.tpu_config": "tensorflow_estimator.python.estimator.tpu.tpu_config",
    "tpu.python.tpu.tpu_estimator": "tensorflow_estimator.python.estimator.tpu.tpu_estimator",
    "tpu.python.tpu.tpu_optimizer": "tensorflow.python.tpu.tpu_optimizer",
    "tpu.python.tpu.async_checkpoint": "tensorflow.python.tpu.async_checkpoint",
    "tpu.python.tpu.tpu_function": "tensorflow.python.tpu.tpu_function",
    "tpu.python.tpu.tpu": "tensorflow.python.tpu.tpu",
    "image.python.ops.image_ops": "tensorflow_addons.image",
    "image.python.ops.distort_image_ops": "tensorflow_addons.image",
    "image.python.ops.dense_image_warp": "tensorflow_addons.image",
    "framework.python.framework.checkpoint_utils": "tensorflow.python.training.checkpoint_utils",
    "image.ops.gen_image_ops": "tensorflow.python.ops.gen_image_ops",
    "rnn.ops.gen_lstm_ops": "tensorflow.python.ops.gen_rnn_ops",
    "rnn.python.ops.gen_lstm_ops": "tensorflow.python.ops.gen_rnn_ops",
    "compiler.xla": "tensorflow.python.compiler.xla.xla",
    "staging.python.ops.data_flow_ops": "tensorflow.python.ops.data_flow_ops",
    **contrib_misc.DEEP_MODULES,
    **contrib_paths.DEEP_MODULES,
    "saved_model.python.saved_model.reader": "tensorflow.python.tools.saved_model_utils",
})


def _mnist_module(kind):
    def build():
        from npu_sim_bridge.tf1compat import mnist

        datasets = mnist.learn_datasets_module()
        datasets.base = ContribModule("learn.python.learn.datasets.base", contrib_paths.learn_datasets_base_names(),
                                      doc="tensorflow.contrib.learn.python.learn.datasets.base")
        return datasets if kind == "datasets" else datasets.mnist
    return build


def _combined(path, names, bases):
    return lambda: ContribModule(path, names(), bases, doc=f"tensorflow.contrib.{path}")


def _via(path):
    """A deep path that is another tf.contrib path's module (tf.contrib.<path>, reached attribute by attribute)."""
    def build():
        current = contrib_module()
        for part in path.split("."):
            current = getattr(current, part)
        return current
    return build


# Deep paths whose module is built here (names TensorFlow 1.15 had in one module, now in several or in tf1compat).
DEEP_FACTORIES = {
    "rnn.python.ops.core_rnn_cell": _combined("rnn.python.ops.core_rnn_cell", rnn_more.core_rnn_cell_names,
                                              (_V1.nn.rnn_cell,)),
    "rnn.python.ops.rnn_cell": _combined("rnn.python.ops.rnn_cell", rnn_more.core_rnn_cell_names,
                                         (_V1.nn.rnn_cell,)),
    "cudnn_rnn.python.ops.cudnn_rnn_ops": _combined("cudnn_rnn.python.ops.cudnn_rnn_ops", rnn_more.cudnn_rnn_names,
                                                    ()),
    "cudnn_rnn.python.layers": _combined("cudnn_rnn.python.layers", rnn_more.cudnn_rnn_names, ()),
    "framework.python.framework.tensor_util": _combined("framework.python.framework.tensor_util",
                                                        contrib_paths.tensor_util_names, ()),
    "training.python.training.hparam": lambda: ContribModule("training.python.training.hparam", {"HParams": HParams}),
    "model_pruning.python.pruning": _via("model_pruning"),
    **{f"mixed_precision.python.{name}": _via("mixed_precision") for name in ("loss_scale_manager",
                                                                            "loss_scale_optimizer")},
    "cudnn_rnn.python.layers.cudnn_rnn": _combined("cudnn_rnn.python.layers.cudnn_rnn", rnn_more.cudnn_rnn_names,
                                                   ()),
    **{path: (lambda path=path: ContribModule(path, seq2seq.seq2seq_names(), contrib_more.seq2seq_bases(),
                                                doc=f"tensorflow.contrib.{path}")) for path in seq2seq.DEEP_PATHS},
    "quantize.python.graph_matcher": lambda: ContribModule("quantize.python.graph_matcher",
                                                           graph_matcher.graph_matcher_names()),
    "quantize.python.quantize_graph": lambda: ContribModule("quantize.python.quantize_graph",
                                                            contrib_more.quantize_names()),
    "all_reduce.python.all_reduce": lambda: ContribModule("all_reduce.python.all_reduce", all_reduce.all_reduce_names(),
                                                          doc="tensorflow.contrib.all_reduce.python.all_reduce"),
    "learn.python.learn.learn_runner": _via("learn.learn_runner"),
    "learn.python.learn.utils.saved_model_export_utils": _via("learn.utils.saved_model_export_utils"),
    "learn.python.learn.preprocessing": _via("learn.preprocessing"),
    "learn.python.learn.experiment": _via("learn.experiment"),
    "learn.python.learn.datasets": _mnist_module("datasets"),
    "learn.python.learn.datasets.mnist": _mnist_module("mnist"),
    "learn.datasets.mnist": _mnist_module("mnist"),
}

# tf.contrib paths that work with a difference from TensorFlow 1.15 (`npu-sim check` says which), by prefix; the
# longest prefix that matches decides, and None means "as TensorFlow 1.15" (a TF1 name inside a different module).
DIFFERENCES = {
    "tpu": "runs on the CPU/GPU: TPUEstimator needs use_tpu=False",
    "lookup.HashTable": "is tf.compat.v1.lookup.StaticHashTable",
    "summary": "writes tf.compat.v2.summary events; the step defaults to the global step",
    "image": "is tensorflow_addons.image (interpolation names are case-insensitive)",
    "crf": "is tensorflow_addons.text: crf_log_likelihood without transition_params creates a tf.Variable "
           "`transitions`",
    "seq2seq": "is tensorflow_addons.seq2seq: attention mechanisms, AttentionWrapper (with TF1's zero_state) and "
               "BeamSearchDecoder are its Keras layers, with TensorFlow Addons' arguments and Keras variable names "
               "(TF 1.15 checkpoints of attention models do not load)",
    **{f"seq2seq.{name}": None for name in seq2seq.TF1_NAMES},
    **{f"{path}.{name}": None for path in seq2seq.DEEP_PATHS for name in seq2seq.TF1_NAMES},
    "rnn.LSTMBlockCell": "is tf.compat.v1.nn.rnn_cell.LSTMCell (same variables; unfused ops)",
    "cudnn_rnn.CudnnLSTM": "runs TensorFlow's LSTM ops layer by layer: its variables are per-layer kernels and biases, "
                           "not cuDNN's opaque parameter buffer (checkpoints of the cuDNN layer do not load)",
    "cudnn_rnn.CudnnGRU": "runs TensorFlow's GRU ops layer by layer: its variables are per-layer kernels and biases, "
                          "not cuDNN's opaque parameter buffer (checkpoints of the cuDNN layer do not load)",
    "recurrent": "runs as tf.compat.v1.nn.dynamic_rnn (a while loop, not the functional Recurrent op)",
    "model_pruning": "prunes by magnitude without block pruning or per-layer sparsity maps (model_pruning.py)",
    **contrib_misc.DIFFERENCES,
}
# tf.contrib paths whose calls are accepted and do nothing, with why.
NO_EFFECT = {f"quantize{module}.{name}": contrib_more.QUANTIZE_NO_EFFECT for name in contrib_more.quantize_names()
             for module in ("", ".python.quantize_graph")}

def _missing_message(qualified, replacement):
    base = f"tf.contrib.{qualified} is not available: tf.contrib was removed in TensorFlow 2"
    if replacement:
        return f"{base}; use {replacement} instead (change this line of the script)"
    return (f"{base} and has no direct equivalent that npu_sim_bridge maps; rewrite this part of the script "
            "with TensorFlow 2.15 APIs, or run the part that needs it elsewhere")


class ContribModule(types.ModuleType):
    """tensorflow.contrib.<name>: fixed names first (a dict among them is a submodule), then the attributes of
    `bases`, else TF1ContribError."""

    def __init__(self, short_name, names=None, bases=(), doc=None):
        super().__init__(f"tensorflow.contrib.{short_name}", doc)
        self.__dict__[CONTRIB_SHORT_NAME_KEY] = short_name
        self.__dict__[CONTRIB_BASES_KEY] = tuple(bases)
        for name, value in (names or {}).items():  # a dict value is a submodule of its own names
            self.__dict__[name] = ContribModule(f"{short_name}.{name}", value, doc=f"tensorflow.contrib.{short_name}."
                                                f"{name}") if isinstance(value, dict) else value

    def __getattr__(self, name):
        if name == "__all__":  # `from tensorflow.contrib.<module> import *`: every public name it resolves
            return self.__dir__()
        if name.startswith("__"):
            raise AttributeError(name)
        for base in self.__dict__[CONTRIB_BASES_KEY]:
            if hasattr(base, name):
                return getattr(base, name)
        short_name = self.__dict__[CONTRIB_SHORT_NAME_KEY]
        qualified = f"{short_name}.{name}"
        deep = _deep_module(qualified)
        if deep is not None:
            self.__dict__[name] = deep
            return deep
        replacement = SYMBOL_REPLACEMENTS.get(qualified) or MODULE_REPLACEMENTS.get(short_name.partition('.')[0])
        raise TF1ContribError(_missing_message(qualified, replacement))

    def __dir__(self):
        names = {name for name in self.__dict__ if not name.startswith("_")}
        for base in self.__dict__[CONTRIB_BASES_KEY]:
            names.update(name for name in dir(base) if not name.startswith("_"))
        return sorted(names)


def _deep_module(path):
    """The module tf.contrib.<path> became, a namespace leading to one, or None."""
    if path in DEEP_FACTORIES:
        return DEEP_FACTORIES[path]()
    if path in slim.DEEP_COMBINED:
        names, bases = slim.DEEP_COMBINED[path]
        return ContribModule(path, names(), bases(), doc=f"tensorflow.contrib.{path}")
    if path in DEEP_MODULES:
        target = DEEP_MODULES[path]
        return slim.tf_slim_module(target) if target.startswith("tf_slim") else importlib.import_module(target)
    if any(key.startswith(path + ".") for key in (*DEEP_MODULES, *DEEP_FACTORIES)):
        return ContribModule(path, doc=f"tensorflow.contrib.{path}")
    return None


def _module(short_name, names=None, bases=(), doc=None):
    return lambda: ContribModule(short_name, names() if callable(names) else names,
                                 bases() if callable(bases) else bases, doc)


def _small(module):
    return lambda: contrib_more.small_module_names()[module]


def _merged(*sources):
    return lambda: {name: value for source in sources for name, value in source().items()}


_BUILDERS = {
    "slim": _module("slim", _merged(slim.slim_names, _small("slim")), lambda: (slim.tf_slim_module(),),
                    "tf.contrib.slim: the tf-slim package"),
    "layers": _module("layers", _small("layers"), lambda: (slim.tf_slim_module("tf_slim.layers"),),
                      "tf.contrib.layers: tf_slim.layers"),
    "framework": _module("framework", contrib_more.framework_names, slim.framework_bases,
                         "tf.contrib.framework: tf_slim's arg_scope and variables, checkpoint readers"),
    "losses": _module("losses", None, lambda: (slim.tf_slim_module("tf_slim.losses"),)),
    "metrics": _module("metrics", _small("metrics"), lambda: (slim.tf_slim_module("tf_slim.metrics"),)),
    "training": _module("training", _merged(lambda: {"HParams": HParams,
                                                     "checkpoints_iterator": tf.train.checkpoints_iterator},
                                            _small("training"), contrib_misc.training_names),
                        lambda: (slim.tf_slim_module("tf_slim.training.training"),
                                 slim.tf_slim_module("tf_slim.training.evaluation"))),
    "rnn": _module("rnn", contrib_more.rnn_names, (_V1.nn.rnn_cell, _V1.nn),
                   "tf.compat.v1.nn.rnn_cell, tf.compat.v1.nn, LayerNormBasicLSTMCell"),
    "data": _module("data", _small("data"), (tf.data.experimental,), "tf.data.experimental"),
    "image": _module("image", None, contrib_more.image_bases, "tf.contrib.image: tensorflow_addons.image"),
    "opt": _module("opt", contrib_more.opt_names),
    "summary": _module("summary", contrib_more.summary_names, doc="tf.compat.v2.summary in a TF1 graph"),
    "quantize": _module("quantize", contrib_more.quantize_names),
    "tensorrt": _module("tensorrt", contrib_more.tensorrt_names, doc="tf.contrib.tensorrt: accepted without effect"),
    "all_reduce": _module("all_reduce", all_reduce.all_reduce_names, doc="tf.contrib.all_reduce (all_reduce.py)"),
    "util": _module("util", _merged(contrib_more.util_names, lambda: {"loader": contrib_misc.util_loader_names()})),
    "predictor": _module("predictor", contrib_misc.predictor_names),
    "eager": _module("eager", contrib_misc.eager_names),
    "integrate": _module("integrate", contrib_misc.integrate_names, doc="tf.contrib.integrate: odeint (odeint.py)"),
    "learn": _module("learn", lambda: importlib.import_module("npu_sim_bridge.tf1compat.learn").learn_names(), doc="tf.contrib.learn: Experiment, learn_runner, export strategies, "
                                                "VocabularyProcessor (learn.py), MNIST datasets, ModeKeys"),
    "distributions": _module("distributions", _merged(_small("distributions"), contrib_misc.distributions_names),
                             (_V1.distributions,)),
    "tpu": _module("tpu", _small("tpu"), (_V1.estimator.tpu, _V1.tpu), "tf.compat.v1.estimator.tpu, tf.compat.v1.tpu"),
    "cluster_resolver": _module("cluster_resolver", None, (tf.distribute.cluster_resolver,)),
    "distribute": _module("distribute", contrib_misc.distribute_names, (_V1.distribute,)),
    "keras": _module("keras", None, (_V1.keras,)),
    "lookup": _module("lookup", _small("lookup"), (_V1.lookup,)),
    "stateless": _module("stateless", _small("stateless")),
    "nn": _module("nn", _small("nn"), (tf.nn,)),
    "crf": _module("crf", None, contrib_more.crf_bases, "tf.contrib.crf: tensorflow_addons.text"),
    "seq2seq": _module("seq2seq", seq2seq.seq2seq_names, contrib_more.seq2seq_bases,
                       "tf.contrib.seq2seq: TF1 Helpers, BasicDecoder, dynamic_decode; tensorflow_addons.seq2seq"),
    "sparsemax": _module("sparsemax", contrib_more.sparsemax_names),
    "resampler": _module("resampler", contrib_more.resampler_names),
    "staging": _module("staging", _small("staging")),
    "legacy_seq2seq": _module("legacy_seq2seq", _small("legacy_seq2seq")),
    "compiler": _module("compiler", doc="tf.contrib.compiler: xla is tensorflow.python.compiler.xla.xla"),
    "cudnn_rnn": _module("cudnn_rnn", rnn_more.cudnn_rnn_names),
    "recurrent": _module("recurrent", rnn_more.recurrent_names),
    "tfprof": _module("tfprof", contrib_estimator.tfprof_names),
    "graph_editor": _module("graph_editor",
                            lambda: importlib.import_module("npu_sim_bridge.tf1compat.graph_editor_copy").names(),
                            doc="tf.contrib.graph_editor: walks, selection, SubGraphView, reroute, copy (graph_editor*.py)"),
    "estimator": _module("estimator", contrib_estimator.estimator_names, (_V1.estimator,)),
    "model_pruning": _module("model_pruning", lambda: importlib.import_module(
        "npu_sim_bridge.tf1compat.model_pruning").pruning_names(), doc="tf.contrib.model_pruning (model_pruning.py)"),
}


def register_module(short_name, names, doc=None):
    """Map tf.contrib.<short_name> onto `names` (a dict, or a function returning one, called on first use)."""
    if short_name not in TF115_CONTRIB_MODULES:
        raise ValueError(f"tf.contrib had no module {short_name!r}")
    _BUILDERS[short_name] = _module(short_name, names, doc=doc)
    if _contrib is not None:
        _contrib.__dict__.pop(short_name, None)


def mapped_modules():
    """The tf.contrib modules that resolve to working names."""
    return frozenset(_BUILDERS)


def _caller_stacklevel():
    """The warnings stacklevel of the first frame outside the TF1 plumbing and importlib (the script's line)."""
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
            module = ContribModule(name, contrib_paths.unusable_names(
                name, lambda symbol: _missing_message(f"{name}.{symbol}", replacement)),
                                   doc=_missing_message(name, replacement))
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
    """The module `import tensorflow.contrib.<parts>` gives, or ModuleNotFoundError naming it and what to use.

    A deep path with a module of its own (DEEP_MODULES, DEEP_FACTORIES) is that module; any other path is
    walked attribute by attribute from tf.contrib, so `import tensorflow.contrib.layers` gives the very
    module `tf.contrib.layers` is, whose names a `from ... import` then finds.
    """
    path = ".".join(parts)
    if path in DEEP_FACTORIES or path in DEEP_MODULES or path in slim.DEEP_COMBINED:
        return _deep_module(path)
    current = contrib_module()
    for index, part in enumerate(parts):
        name = "tensorflow.contrib." + ".".join(parts[:index + 1])
        try:
            current = getattr(current, part)
        except TF1ContribError as error:
            raise ModuleNotFoundError(f"No module named {name!r}: {error}", name=name) from None
        except AttributeError:
            if not hasattr(current, "__path__"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name) from None
            current = importlib.import_module(f"{current.__name__}.{part}")  # a submodule of tf_slim & co.
        if not isinstance(current, types.ModuleType):
            raise ModuleNotFoundError(f"No module named {name!r}: tf.contrib.{'.'.join(parts[:index + 1])} is not a "
                                      "module", name=name)
    return current
