"""TensorFlow 1.15 names inside tensorflow.python that TensorFlow 2.15 moved or dropped, and where they are now.

Scripts reach TensorFlow's internals directly (`from tensorflow.python.framework import graph_util`,
`control_flow_ops.cond`, `nest.is_sequence`). The TF1 view (python_view.PythonView) looks a name up here
only when the real module lacks it, so TensorFlow 2.15's own names always win. Each entry is
(where it is now, a function returning it); the text is what `npu-sim check` prints.
"""

import importlib

import tensorflow as tf

_V1 = tf.compat.v1


def _attr(module_name, name):
    return lambda: getattr(importlib.import_module(module_name), name)


def _module(module_name):
    return lambda: importlib.import_module(module_name)


def _threadpool():
    from npu_sim_bridge.tf1compat import threadpool

    return threadpool


def _max_pool_grad(orig_input, orig_output, grad, ksize, strides, padding, data_format="NHWC", name=None):
    """gen_nn_ops._max_pool_grad of TensorFlow 1.15 (the op wrapper lost its underscore)."""
    return tf.raw_ops.MaxPoolGrad(orig_input=orig_input, orig_output=orig_output, grad=grad, ksize=ksize,
                                  strides=strides, padding=padding, data_format=data_format, name=name)


def _like_rnncell(cell):
    """rnn_cell_impl._like_rnncell of TensorFlow 1.15: whether `cell` has what an RNN cell needs."""
    conditions = [hasattr(cell, "output_size"), hasattr(cell, "state_size"),
                  hasattr(cell, "get_initial_state") or hasattr(cell, "zero_state"), callable(cell)]
    return all(conditions)


def _get_registered_ops():
    """op_def_registry.get_registered_ops of TensorFlow 1.15: {op name: OpDef} of every registered op."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return {op.name: op for op in op_list.op}


def _to_proto_fn(v, export_scope=None):
    """resource_variable_ops._to_proto_fn of TensorFlow 1.15: the VariableDef of a variable."""
    return v.to_proto(export_scope=export_scope)


def _from_proto_fn(v, import_scope=None):
    """resource_variable_ops._from_proto_fn of TensorFlow 1.15: the variable of a VariableDef (resource or not)."""
    if v.is_resource:
        from tensorflow.python.ops import resource_variable_ops

        return resource_variable_ops.ResourceVariable.from_proto(v, import_scope=import_scope)
    from tensorflow.python.ops import ref_variable

    return ref_variable.RefVariable(variable_def=v, import_scope=import_scope)


def _is_backpropagatable(tensor):
    """gradients_util._IsBackpropagatable of TensorFlow 1.15: a trainable dtype, or bfloat16."""
    from tensorflow.python.eager import backprop_util

    return backprop_util.IsTrainable(tensor) or tf.as_dtype(tensor.dtype).base_dtype == tf.bfloat16


def _record_gradient(op_name, inputs, attrs, results, name=None):
    """backprop._record_gradient of TensorFlow 1.15 (its `name` is unused by TensorFlow 2.15's record_gradient)."""
    del name
    from tensorflow.python.eager import backprop

    return backprop.record_gradient(op_name, inputs, attrs, results)


def _tracking_module():
    """TensorFlow 1.15's tensorflow.python.training.tracking.tracking: its classes, now in tensorflow.python.trackable."""
    import types

    from tensorflow.python.trackable import asset, autotrackable, resource

    module = types.ModuleType("tensorflow.python.training.tracking.tracking", _tracking_module.__doc__)
    for source, names in ((autotrackable, ("AutoTrackable",)), (asset, ("Asset",)),
                          (resource, ("CapturableResource", "TrackableResource", "ResourceTracker",
                                      "resource_tracker_scope"))):
        for name in names:
            setattr(module, name, getattr(source, name))
    module.TrackableAsset = asset.Asset  # TensorFlow 1.15's older name of Asset
    return module


# module -> name -> (where TensorFlow 2.15 has it, factory)
TABLE = {
    "tensorflow.python.framework.graph_util": {
        name: (f"tf.compat.v1.graph_util.{name}", _attr("tensorflow.compat.v1.graph_util", name))
        for name in ("convert_variables_to_constants", "extract_sub_graph", "must_run_on_cpu",
                     "remove_training_nodes", "tensor_shape_from_node_def_name")},
    "tensorflow.python.ops.control_flow_ops": {
        "cond": ("tf.compat.v1.cond", lambda: _V1.cond),
        "while_loop": ("tf.compat.v1.while_loop", lambda: _V1.while_loop),
        "Assert": ("tf.compat.v1.Assert", lambda: _V1.Assert),
        "case": ("tf.compat.v1.case", lambda: _V1.case),
    },
    "tensorflow.python.ops.array_ops": {
        "stack": ("tf.stack", lambda: tf.stack),
        "unstack": ("tf.unstack", lambda: tf.unstack),
    },
    "tensorflow.python.ops.variables": {
        "VariableV1": ("tensorflow.python.ops.variable_v1.VariableV1",
                       _attr("tensorflow.python.ops.variable_v1", "VariableV1")),
    },
    "tensorflow.python.ops.variable_scope": {
        "variable": ("tf.compat.v1.Variable", lambda: _V1.Variable),
    },
    "tensorflow.python.ops.gen_nn_ops": {
        "_max_pool_grad": ("tf.raw_ops.MaxPoolGrad", lambda: _max_pool_grad),
    },
    "tensorflow.python.ops.rnn_cell_impl": {
        "_like_rnncell": ("a check of the cell's attributes", lambda: _like_rnncell),
        "_Linear": ("npu_sim_bridge.tf1compat.rnn_more._Linear (kernel and bias in the current variable scope)",
                    _attr("npu_sim_bridge.tf1compat.rnn_more", "_Linear")),
    },
    "tensorflow.python.framework.ops": {
        "Tensor": ("tf.Tensor", lambda: tf.Tensor),
        "IndexedSlices": ("tf.IndexedSlices", lambda: tf.IndexedSlices),
        "IndexedSlicesValue": ("tensorflow.python.framework.indexed_slices.IndexedSlicesValue",
                               _attr("tensorflow.python.framework.indexed_slices", "IndexedSlicesValue")),
        "SparseTensor": ("tf.SparseTensor", lambda: tf.SparseTensor),
        "TensorShape": ("tf.TensorShape", lambda: tf.TensorShape),
        "Dimension": ("tf.compat.v1.Dimension", lambda: _V1.Dimension),
        "register_tensor_conversion_function": ("tf.register_tensor_conversion_function",
                                                lambda: tf.register_tensor_conversion_function),
    },
    "tensorflow.python.util.nest": {
        "is_sequence": ("tf.nest.is_nested", lambda: tf.nest.is_nested),
        "is_sequence_or_composite": ("nest.is_nested_or_composite",
                                     _attr("tensorflow.python.util.nest", "is_nested_or_composite")),
    },
    "tensorflow.python.pywrap_tensorflow": {
        "NewCheckpointReader": ("tf.compat.v1.train.NewCheckpointReader", lambda: _V1.train.NewCheckpointReader),
        "EqualGraphDefWrapper": ("tensorflow.python.client._pywrap_tf_session.EqualGraphDefWrapper",
                                 _attr("tensorflow.python.client._pywrap_tf_session", "EqualGraphDefWrapper")),
    },
    "tensorflow.python.data.experimental.ops": {
        "threadpool": ("tf.data.Options().threading.private_threadpool_size", _threadpool),
    },
    "tensorflow.python.distribute": {
        "distribution_strategy_context": ("tensorflow.python.distribute.distribute_lib",
                                          _module("tensorflow.python.distribute.distribute_lib")),
    },
    "tensorflow.python.trackable": {  # what tensorflow.python.training.tracking held in TensorFlow 1.15
        "tracking": ("tensorflow.python.trackable.autotrackable, .asset and .resource", _tracking_module),
        "util": ("tensorflow.python.checkpoint.checkpoint", _module("tensorflow.python.checkpoint.checkpoint")),
        "graph_view": ("tensorflow.python.checkpoint.graph_view", _module("tensorflow.python.checkpoint.graph_view")),
        "object_identity": ("tensorflow.python.util.object_identity", _module("tensorflow.python.util.object_identity")),
    },
    "tensorflow.python.training": {
        "tracking": ("tensorflow.python.trackable", _module("tensorflow.python.trackable")),
        "distribution_strategy_context": ("tensorflow.python.distribute.distribute_lib",
                                          _module("tensorflow.python.distribute.distribute_lib")),
    },
    "tensorflow.python": {
        "graph_util": ("tensorflow.python.framework.graph_util", _module("tensorflow.python.framework.graph_util")),
    },
    "tensorflow.python.summary": {
        "FileWriter": ("tf.compat.v1.summary.FileWriter", lambda: _V1.summary.FileWriter),
    },
    "tensorflow.python.framework.op_def_registry": {
        "get_registered_ops": ("op_def_registry.get(name) per op; all: the C API's op list",
                               lambda: _get_registered_ops),
    },
    "tensorflow.python.ops.resource_variable_ops": {
        "_to_proto_fn": ("variable.to_proto", lambda: _to_proto_fn),
        "_from_proto_fn": ("ResourceVariable.from_proto / RefVariable(variable_def=...)", lambda: _from_proto_fn),
    },
    "tensorflow.python.ops.gradients_util": {
        "_IsBackpropagatable": ("tensorflow.python.eager.backprop_util.IsTrainable", lambda: _is_backpropagatable),
    },
    "tensorflow.python.eager.backprop": {
        "_record_gradient": ("tensorflow.python.eager.backprop.record_gradient", lambda: _record_gradient),
    },
    "tensorflow.python.util.tf_export": {
        "estimator_export": ("tensorflow_estimator.python.estimator.estimator_export.estimator_export",
                             _attr("tensorflow_estimator.python.estimator.estimator_export", "estimator_export")),
    },
    "tensorflow.python.layers.base": {
        "_Layer": ("tensorflow.python.layers.base.Layer", _attr("tensorflow.python.layers.base", "Layer")),
    },
}

def _keras_table():
    from npu_sim_bridge.tf1compat.keras_compat import KERAS_TABLE

    return KERAS_TABLE


_MISSING = object()


def _entries(module_name):
    entries = TABLE.get(module_name)
    if entries is None and module_name.startswith("keras."):
        entries = _keras_table().get(module_name)
    return entries or {}


def lookup(module_name, name, default=_MISSING):
    """The TF 1.15 name `name` of `module_name` as TensorFlow 2.15 has it, else `default` (else AttributeError)."""
    entry = _entries(module_name).get(name)
    if entry is None:
        if default is _MISSING:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return default
    return entry[1]()


def names(module_name):
    """The TF 1.15 names this table adds to `module_name`."""
    return sorted(_entries(module_name))


def where(module_name, name):
    """What TensorFlow 2.15 calls `module_name.name`, or None when the table has no entry."""
    entry = _entries(module_name).get(name)
    return entry[0] if entry else None
