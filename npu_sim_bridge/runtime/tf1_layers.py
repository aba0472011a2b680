"""tf.contrib.layers / tf.contrib.slim basics on TensorFlow 2.15: arg_scope, initializers, regularizers, layers.

Each function keeps TensorFlow 1.15's signature, defaults, default variable scope and variable names
(`Conv/weights`, `fully_connected/biases`, `BatchNorm/moving_mean`, `LayerNorm/gamma`), so graphs and
checkpoints look as they did. Variables go to GLOBAL_VARIABLES and MODEL_VARIABLES (and
TRAINABLE_VARIABLES when trainable), as contrib's model variables did.
"""

import contextlib
import functools
import math
import numbers

import tensorflow as tf
from tensorflow.python.framework import smart_cond

_V1 = tf.compat.v1
_MODEL_VARIABLES = _V1.GraphKeys.MODEL_VARIABLES

# ---------------------------------------------------------------------------------------------------
# arg_scope

_arg_scope_stack = [{}]


def _scope_key(func):
    return (func.__module__, func.__name__)


def current_arg_scope():
    """The arg_scope in force: {(module, function name): {argument: value}}."""
    return _arg_scope_stack[-1]


def add_arg_scope(func):
    """Decorate `func` so that arg_scope([func], ...) supplies default keyword arguments to it."""
    key = _scope_key(func)

    @functools.wraps(func)
    def with_arg_scope(*args, **kwargs):
        merged = dict(current_arg_scope().get(key, {}))
        merged.update(kwargs)
        return func(*args, **merged)

    with_arg_scope.npu_sim_arg_scope_key = key
    return with_arg_scope


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs):
    """Default keyword arguments for the listed functions inside the block (or re-enter a scope dict)."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("arg_scope: when re-entering a scope given as a dict, pass no keyword arguments")
        _arg_scope_stack.append(dict(list_ops_or_scope))
    else:
        if not isinstance(list_ops_or_scope, (list, tuple)):
            raise TypeError("arg_scope expects a list or tuple of functions (or a scope dict), got "
                            f"{type(list_ops_or_scope).__name__}")
        scope = {key: dict(value) for key, value in current_arg_scope().items()}
        for op in list_ops_or_scope:
            key = getattr(op, "npu_sim_arg_scope_key", None)
            if key is None:
                raise ValueError(f"{getattr(op, '__name__', op)!r} is not decorated with @add_arg_scope, so arg_scope "
                                 "cannot give it arguments")
            scope.setdefault(key, {}).update(kwargs)
        _arg_scope_stack.append(scope)
    try:
        yield current_arg_scope()
    finally:
        _arg_scope_stack.pop()


# ---------------------------------------------------------------------------------------------------
# Initializers and regularizers

def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=tf.float32):
    """contrib's variance scaling: U(+-sqrt(3*factor/n)), else a truncated normal of stddev sqrt(1.3*factor/n)."""
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise ValueError(f"variance_scaling_initializer: mode {mode!r} is invalid, it should be one of: "
                         "FAN_IN, FAN_OUT, FAN_AVG")
    if not tf.as_dtype(dtype).is_floating:
        raise TypeError(f"variance_scaling_initializer: dtype must be a floating point type, got {dtype!r}")

    def initializer(shape, dtype=dtype, partition_info=None):
        if partition_info is not None:
            shape = partition_info.full_shape
        shape = [int(dim) for dim in shape]
        fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1]) if shape else 1.0
        fan_out = float(shape[-1]) if shape else 1.0
        for dim in shape[:-2]:
            fan_in *= dim
            fan_out *= dim
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return _V1.random_uniform(shape, -limit, limit, dtype, seed=seed)
        return _V1.truncated_normal(shape, 0.0, math.sqrt(1.3 * factor / n), dtype, seed=seed)

    return initializer


def xavier_initializer(uniform=True, seed=None, dtype=tf.float32):
    """Glorot initialization: glorot_uniform when uniform, else contrib's truncated normal (factor 1, fan average)."""
    if uniform:
        if tf.as_dtype(dtype) == tf.float32:
            return _V1.glorot_uniform_initializer(seed=seed)
        return _V1.glorot_uniform_initializer(seed=seed, dtype=dtype)
    return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=False, seed=seed, dtype=dtype)


xavier_initializer_conv2d = xavier_initializer


def _check_regularizer_scale(name, scale):
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"{name}: scale cannot be an integer: {scale!r}; write it as a float (e.g. {float(scale)})")
    if not isinstance(scale, numbers.Real) or scale < 0.0:
        raise ValueError(f"{name}: scale must be a float >= 0, got {scale!r}")


def _regularizer(name, scale, scope, penalty):
    _check_regularizer_scale(name, scale)
    if scale == 0.0:
        return lambda _: None

    def regularize(weights):
        with tf.name_scope(scope or name):
            factor = tf.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return tf.multiply(factor, penalty(weights), name="value")

    return regularize


def l2_regularizer(scale, scope=None):
    """A function weights -> scale * sum(weights**2) / 2, as contrib's l2_regularizer."""
    return _regularizer("l2_regularizer", scale, scope, tf.nn.l2_loss)


def l1_regularizer(scale, scope=None):
    """A function weights -> scale * sum(|weights|), as contrib's l1_regularizer."""
    return _regularizer("l1_regularizer", scale, scope, lambda weights: tf.reduce_sum(tf.abs(weights)))


# ---------------------------------------------------------------------------------------------------
# Variables and collections

def _collections(variables_collections, name):
    if isinstance(variables_collections, dict):
        extra = variables_collections.get(name) or []
    else:
        extra = variables_collections or []
    extra = [extra] if isinstance(extra, str) else list(extra)
    return [_V1.GraphKeys.GLOBAL_VARIABLES, _MODEL_VARIABLES, *extra]


def _model_variable(name, shape, dtype, initializer, regularizer, trainable, variables_collections):
    return _V1.get_variable(name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                            trainable=trainable, collections=_collections(variables_collections, name))


def _collect(outputs_collections, outputs):
    if outputs_collections:
        names = [outputs_collections] if isinstance(outputs_collections, str) else outputs_collections
        for collection in names:
            _V1.add_to_collection(collection, outputs)
    return outputs


def _pair(name, value):
    if isinstance(value, numbers.Integral):
        return int(value), int(value)
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return value


def _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn, outputs_collections, data_format):
    if normalizer_fn is not None:
        outputs = normalizer_fn(outputs, **(normalizer_params or {}))
    elif biases is not None:
        outputs = tf.nn.bias_add(outputs, biases, data_format=data_format)
    if activation_fn is not None:
        outputs = activation_fn(outputs)
    return _collect(outputs_collections, outputs)


# ---------------------------------------------------------------------------------------------------
# Layers

@add_arg_scope
def fully_connected(inputs, num_outputs, activation_fn=tf.nn.relu, normalizer_fn=None, normalizer_params=None,
                    weights_initializer=None, weights_regularizer=None,
                    biases_initializer=_V1.zeros_initializer(), biases_regularizer=None, reuse=None,
                    variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    """contrib.layers.fully_connected: `weights` [in, num_outputs] and `biases` in scope `fully_connected`."""
    if not isinstance(num_outputs, numbers.Integral):
        raise ValueError(f"fully_connected: num_outputs must be an int, got {num_outputs!r}")
    with _V1.variable_scope(scope, "fully_connected", [inputs], reuse=reuse) as sc:
        inputs = tf.convert_to_tensor(inputs)
        depth = inputs.shape[-1]
        if depth is None:
            raise ValueError(f"fully_connected {sc.name!r}: the last dimension of its input must be known, "
                             f"got shape {inputs.shape}")
        dtype = inputs.dtype.base_dtype
        weights = _model_variable("weights", [int(depth), num_outputs], dtype,
                                  weights_initializer or xavier_initializer(), weights_regularizer, trainable,
                                  variables_collections)
        if inputs.shape.rank == 2:
            outputs = tf.matmul(inputs, weights)
        else:
            outputs = tf.tensordot(inputs, weights, [[inputs.shape.rank - 1], [0]])
        biases = None
        if normalizer_fn is None and biases_initializer is not None:
            biases = _model_variable("biases", [num_outputs], dtype, biases_initializer, biases_regularizer, trainable,
                                     variables_collections)
        return _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn, outputs_collections, None)


@add_arg_scope
def conv2d(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None, rate=1,
           activation_fn=tf.nn.relu, normalizer_fn=None, normalizer_params=None, weights_initializer=None,
           weights_regularizer=None, biases_initializer=_V1.zeros_initializer(), biases_regularizer=None, reuse=None,
           variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    """contrib.layers.conv2d: `weights` [kh, kw, in, num_outputs] and `biases` in scope `Conv`."""
    if data_format not in (None, "NHWC", "NCHW"):
        raise ValueError(f"conv2d: data_format {data_format!r} is invalid, it should be one of: NHWC, NCHW")
    data_format = data_format or "NHWC"
    kernel_h, kernel_w = _pair("kernel_size", kernel_size)
    stride_h, stride_w = _pair("stride", stride)
    rate_h, rate_w = _pair("rate", rate)
    with _V1.variable_scope(scope, "Conv", [inputs], reuse=reuse) as sc:
        inputs = tf.convert_to_tensor(inputs)
        channels = inputs.shape[1 if data_format == "NCHW" else -1]
        if channels is None:
            raise ValueError(f"conv2d {sc.name!r}: the channel dimension of its input must be known, "
                             f"got shape {inputs.shape}")
        dtype = inputs.dtype.base_dtype
        weights = _model_variable("weights", [kernel_h, kernel_w, int(channels), num_outputs], dtype,
                                  weights_initializer or xavier_initializer(), weights_regularizer, trainable,
                                  variables_collections)
        outputs = tf.nn.convolution(inputs, weights, strides=[stride_h, stride_w], padding=padding.upper(),
                                    dilations=[rate_h, rate_w], data_format=data_format)
        biases = None
        if normalizer_fn is None and biases_initializer is not None:
            biases = _model_variable("biases", [num_outputs], dtype, biases_initializer, biases_regularizer, trainable,
                                     variables_collections)
        return _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn, outputs_collections,
                       data_format)


convolution2d = conv2d


def _pool(kind, inputs, kernel_size, stride, padding, data_format, outputs_collections, scope):
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"{kind}: data_format {data_format!r} is invalid, it should be one of: NHWC, NCHW")
    kernel_h, kernel_w = _pair("kernel_size", kernel_size)
    stride_h, stride_w = _pair("stride", stride)
    pool = tf.nn.max_pool2d if kind == "max_pool2d" else tf.nn.avg_pool2d
    with tf.name_scope(scope or ("MaxPool2D" if kind == "max_pool2d" else "AvgPool2D")):
        outputs = pool(inputs, ksize=[kernel_h, kernel_w], strides=[stride_h, stride_w], padding=padding.upper(),
                       data_format=data_format)
        return _collect(outputs_collections, outputs)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format="NHWC", outputs_collections=None,
               scope=None):
    """contrib.layers.max_pool2d."""
    return _pool("max_pool2d", inputs, kernel_size, stride, padding, data_format, outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format="NHWC", outputs_collections=None,
               scope=None):
    """contrib.layers.avg_pool2d."""
    return _pool("avg_pool2d", inputs, kernel_size, stride, padding, data_format, outputs_collections, scope)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
    """contrib.layers.flatten: [batch, ...] -> [batch, k]."""
    with tf.name_scope(scope or "Flatten"):
        inputs = tf.convert_to_tensor(inputs)
        if inputs.shape.rank is not None and inputs.shape.rank < 2:
            raise ValueError(f"flatten: its input must have rank >= 2 ([batch, ...]), got shape {inputs.shape}")
        outputs = tf.reshape(inputs, tf.stack([tf.shape(inputs)[0], -1]))
        if inputs.shape.rank is not None:
            outputs.set_shape([inputs.shape[0], inputs.shape[1:].num_elements()])
        return _collect(outputs_collections, outputs)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True, outputs_collections=None, scope=None,
            seed=None):
    """contrib.layers.dropout: keeps each value with probability keep_prob while is_training (bool or tensor)."""
    with tf.name_scope(scope or "Dropout"):
        inputs = tf.convert_to_tensor(inputs)
        outputs = smart_cond.smart_cond(
            is_training,
            lambda: tf.nn.dropout(inputs, rate=1.0 - keep_prob, noise_shape=noise_shape, seed=seed),
            lambda: tf.identity(inputs))
        return _collect(outputs_collections, outputs)


@add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001, activation_fn=None,
               param_initializers=None, param_regularizers=None, updates_collections=_V1.GraphKeys.UPDATE_OPS,
               is_training=True, reuse=None, variables_collections=None, outputs_collections=None, trainable=True,
               fused=None, data_format="NHWC", scope=None):
    """contrib.layers.batch_norm: `beta`, `gamma`, `moving_mean`, `moving_variance` in scope `BatchNorm`.

    updates_collections=None makes the moving-average updates run with the output (forced updates);
    another collection name receives them instead of UPDATE_OPS.
    """
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"batch_norm: data_format {data_format!r} is invalid, it should be one of: NHWC, NCHW")
    initializers = param_initializers or {}
    regularizers = param_regularizers or {}
    with _V1.variable_scope(scope, "BatchNorm", [inputs], reuse=reuse) as sc:
        inputs = tf.convert_to_tensor(inputs)
        axis = 1 if data_format == "NCHW" and inputs.shape.rank != 2 else -1
        layer = _V1.layers.BatchNormalization(
            axis=axis, momentum=decay, epsilon=epsilon, center=center, scale=scale,
            beta_initializer=initializers.get("beta", _V1.zeros_initializer()),
            gamma_initializer=initializers.get("gamma", _V1.ones_initializer()),
            moving_mean_initializer=initializers.get("moving_mean", _V1.zeros_initializer()),
            moving_variance_initializer=initializers.get("moving_variance", _V1.ones_initializer()),
            beta_regularizer=regularizers.get("beta"), gamma_regularizer=regularizers.get("gamma"),
            trainable=trainable, fused=fused, name=sc.name, _scope=sc, _reuse=reuse)
        outputs = layer.apply(inputs, training=is_training)
        for variable, key in ((layer.moving_mean, "moving_mean"), (layer.moving_variance, "moving_variance"),
                              (getattr(layer, "beta", None), "beta"), (getattr(layer, "gamma", None), "gamma")):
            if variable is not None:
                for collection in _collections(variables_collections, key)[1:]:
                    if variable not in _V1.get_collection(collection):
                        _V1.add_to_collection(collection, variable)
        if updates_collections != _V1.GraphKeys.UPDATE_OPS and layer.updates:
            graph_updates = _V1.get_collection_ref(_V1.GraphKeys.UPDATE_OPS)
            graph_updates[:] = [op for op in graph_updates if op not in layer.updates]
            if updates_collections is None:
                with tf.control_dependencies(layer.updates):
                    outputs = tf.identity(outputs)
            else:
                for update in layer.updates:
                    _V1.add_to_collections(updates_collections, update)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect(outputs_collections, outputs)


@add_arg_scope
def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None, variables_collections=None,
               outputs_collections=None, trainable=True, begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """contrib.layers.layer_norm: normalize over axes begin_norm_axis.., `beta`/`gamma` in scope `LayerNorm`."""
    with _V1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse) as sc:
        inputs = tf.convert_to_tensor(inputs)
        rank = inputs.shape.rank
        if rank is None:
            raise ValueError(f"layer_norm {sc.name!r}: the rank of its input must be known")
        norm_axis = begin_norm_axis + rank if begin_norm_axis < 0 else begin_norm_axis
        params_axis = begin_params_axis + rank if begin_params_axis < 0 else begin_params_axis
        if not 0 <= norm_axis < rank or not 0 <= params_axis < rank:
            raise ValueError(f"layer_norm {sc.name!r}: begin_norm_axis {begin_norm_axis} / begin_params_axis "
                             f"{begin_params_axis} are outside an input of rank {rank}")
        params_shape = inputs.shape[params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(f"layer_norm {sc.name!r}: dimensions {params_axis}.. of its input must be known, "
                             f"got shape {inputs.shape}")
        dtype = inputs.dtype.base_dtype
        beta = gamma = None
        if center:
            beta = _model_variable("beta", params_shape, dtype, _V1.zeros_initializer(), None, trainable,
                                   variables_collections)
        if scale:
            gamma = _model_variable("gamma", params_shape, dtype, _V1.ones_initializer(), None, trainable,
                                    variables_collections)
        mean, variance = tf.nn.moments(inputs, list(range(norm_axis, rank)), keepdims=True)
        epsilon = 1e-3 if dtype == tf.float16 else 1e-12
        outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                            variance_epsilon=epsilon)
        outputs.set_shape(inputs.shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect(outputs_collections, outputs)


def repeat(inputs, repetitions, layer, *args, **kwargs):
    """Apply `layer` `repetitions` times, scopes `<scope>/<scope>_1`, `<scope>_2`, ... (slim.repeat)."""
    scope = kwargs.pop("scope", None)
    with _V1.variable_scope(scope, "Repeat", [inputs]):
        outputs = inputs
        base = scope or getattr(layer, "__name__", None) or getattr(getattr(layer, "func", None), "__name__", "repeat")
        for index in range(repetitions):
            outputs = layer(outputs, *args, scope=f"{base}_{index + 1}", **kwargs)
        return outputs


# ---------------------------------------------------------------------------------------------------
# Variable helpers (contrib.framework / slim)

def get_variables(scope=None, suffix=None, collection=_V1.GraphKeys.GLOBAL_VARIABLES):
    """Variables of `collection` whose name starts with `scope` (a regex) and ends with `suffix`."""
    variables = _V1.get_collection(collection, scope)
    if suffix is not None:
        variables = [variable for variable in variables if variable.op.name.endswith(suffix)]
    return variables


def get_model_variables(scope=None, suffix=None):
    """The MODEL_VARIABLES (the layers' weights, biases, batch norm statistics) under `scope`."""
    return get_variables(scope, suffix, _MODEL_VARIABLES)


def get_variables_to_restore(include=None, exclude=None):
    """Global variables under the `include` scopes (all when None) minus those under the `exclude` scopes."""
    if include is None:
        candidates = get_variables()
    else:
        if not isinstance(include, (list, tuple)):
            raise TypeError(f"get_variables_to_restore: include must be a list or tuple of scopes, got {include!r}")
        candidates = [variable for scope in include for variable in get_variables(scope)]
    if exclude is not None and not isinstance(exclude, (list, tuple)):
        raise TypeError(f"get_variables_to_restore: exclude must be a list or tuple of scopes, got {exclude!r}")
    excluded = {id(variable) for scope in exclude or () for variable in get_variables(scope)}
    return [variable for variable in candidates if id(variable) not in excluded]
