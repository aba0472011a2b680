"""npu_bridge.estimator.npu.util in the simulation: argument checks, the process-wide value store, graph attr helpers.

`set_iteration_per_loop` and `IterationPerLoop` keep their signatures; the simulation runs one
training step per Session.run whatever iterations_per_loop says (the NPU runs that many on the
device), so only the `IterationOp` grouping is built.
"""

import os

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from npu_sim_bridge.runtime.hccl import cluster
from npu_sim_bridge.runtime.scopes import KEEP_DTYPE_ATTR

_global_dict = {}


def check_not_none(value, name):
    """Raise ValueError when value is None."""
    if value is None:
        raise ValueError(f"{name} must not be None")


def check_positive_integer(value, name):
    """Raise TypeError unless value is an int, ValueError unless it is > 0."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")


def check_nonnegative_integer(value, name):
    """Raise TypeError unless value is an int, ValueError unless it is >= 0."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be int, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be nonnegative, got {value}")


def check_bool_type(value, name):
    """Raise TypeError unless value is True or False."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def convert_bool_to_int(value):
    """True -> 1, False -> 0, anything else -> -1."""
    if value is True:
        return 1
    if value is False:
        return 0
    return -1


def format_string(value, name):
    """'' for None, the string itself for a str, else TypeError."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be string, got {type(value).__name__}")
    return value


def check_path(path):
    """The real path of an existing directory this process can read and write, else ValueError."""
    if not os.path.exists(path):
        raise ValueError(f"path {path!r} does not exist; create it first")
    real_path = os.path.realpath(path)
    if not os.path.isdir(real_path):
        raise ValueError(f"path {path!r} is not a directory")
    if not os.access(real_path, os.R_OK | os.W_OK):
        raise ValueError(f"path {path!r} is not readable and writable by this process")
    return real_path


def get_ranksize():
    """The rank count as a string, as npu_bridge returns it (RANK_SIZE; '1' without a launcher)."""
    return str(cluster.info().rank_size)


def global_dict_init():
    """Empty the process-wide value store (init_resource calls it)."""
    _global_dict.clear()


def set_value(key, value):
    """Store a value in the process-wide store."""
    _global_dict[key] = value


def get_value(key, def_value=None):
    """A stored value, or def_value."""
    return _global_dict.get(key, def_value)


def _check_train_op(train_op):
    if not isinstance(train_op, tf.Operation):
        raise ValueError(f"train_op must be an Operation (what optimizer.minimize returns), got "
                         f"{type(train_op).__name__}")


def set_iteration_per_loop(sess, train_op, iterations_per_loop=1):
    """train_op itself for 1, else an `IterationOp` grouping it (one step per Session.run in the simulation)."""
    _check_train_op(train_op)
    check_positive_integer(iterations_per_loop, "iterations_per_loop")
    if iterations_per_loop == 1:
        return train_op
    return tf.group(train_op, name="IterationOp")


class IterationPerLoop:
    """npu_bridge's two-step form of set_iteration_per_loop: create the grouping op, then load the count."""

    def __init__(self):
        self._iterations_per_loop = 1

    def create_iteration_per_loop_var(self, train_op):
        """An `IterationOp` grouping train_op."""
        _check_train_op(train_op)
        return tf.group(train_op, name="IterationOp")

    def load_iteration_per_loop_var(self, sess, iterations_per_loop=1):
        """Record the count (checked); the simulation still runs one step per Session.run."""
        check_positive_integer(iterations_per_loop, "iterations_per_loop")
        self._iterations_per_loop = iterations_per_loop


def variable_initializer_in_host(var_list):
    """An op initializing var_list (named var_in_host)."""
    return tf.compat.v1.variables_initializer(var_list, name="var_in_host")


def npu_compile(sess, *fetches):
    """Run the fetches once (the NPU compiles the graph on its first run)."""
    sess.run(fetches)


def keep_tensors_dtypes(graph, input_tensors):
    """Mark the ops producing the named tensors with `_keep_dtype`, as keep_dtype_scope does."""
    if not isinstance(graph, tf.Graph):
        raise ValueError(f"graph must be a tf.Graph, got {type(graph).__name__}")
    if not isinstance(input_tensors, (tuple, list)):
        raise ValueError(f"input_tensors must be a list or tuple of tensor names, got {type(input_tensors).__name__}")
    for tensor_name in input_tensors:
        tensor = graph.get_tensor_by_name(tensor_name)
        tensor.op._set_attr(KEEP_DTYPE_ATTR, attr_value_pb2.AttrValue(b=True))  # pylint: disable=protected-access


def set_graph_exec_config(fetch, dynamic_input=False, dynamic_graph_execute_mode="dynamic_execute",
                          dynamic_inputs_shape_range=None, is_train_graph=False, experimental_config=None):
    """Tag the fetched ops with the dynamic-shape execution attrs npu_bridge sets (no effect in simulation)."""
    if dynamic_graph_execute_mode not in ("lazy_recompile", "dynamic_execute"):
        raise ValueError(f"dynamic_graph_execute_mode {dynamic_graph_execute_mode!r} is invalid, it should be "
                         "lazy_recompile or dynamic_execute")
    attrs = {
        "_graph_dynamic_input": attr_value_pb2.AttrValue(b=dynamic_input),
        "_graph_dynamic_graph_execute_mode": attr_value_pb2.AttrValue(s=dynamic_graph_execute_mode.encode()),
        "_graph_dynamic_inputs_shape_range": attr_value_pb2.AttrValue(s=(dynamic_inputs_shape_range or "").encode()),
        "_is_train_graph": attr_value_pb2.AttrValue(b=is_train_graph),
    }
    if isinstance(fetch, str):
        fetch = tf.compat.v1.get_default_graph().get_tensor_by_name(fetch)
    if isinstance(fetch, (tuple, list)):
        for item in fetch:
            set_graph_exec_config(item, dynamic_input, dynamic_graph_execute_mode, dynamic_inputs_shape_range,
                                  is_train_graph, experimental_config)
        return fetch
    if isinstance(fetch, tf.Tensor):
        operation = fetch.op
    elif isinstance(fetch, tf.Operation):
        operation = fetch
    else:
        raise ValueError(f"fetch must be an op, a tensor, a list or tuple of them, or a tensor name, got "
                         f"{type(fetch).__name__}")
    for key, value in attrs.items():
        operation._set_attr(key, value)  # pylint: disable=protected-access
    return fetch
