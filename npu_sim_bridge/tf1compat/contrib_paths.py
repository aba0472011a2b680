"""Deep tf.contrib module paths of TensorFlow 1.15 that ModelZoo scripts import, on TensorFlow 2.15.

TensorFlow 1.15's contrib modules were often thin re-exports (`contrib/tpu/python/ops/tpu_ops.py` is
`from tensorflow.python.tpu.ops.tpu_ops import *`); those paths are the module TensorFlow 2.15 still
has (DEEP_MODULES). The rest are small modules of their own (factories): framework's tensor_util
helpers and learn's datasets.base (CSV datasets, download with retries). And a few names of unmapped modules
import and fail when used (UNUSABLE_NAMES), as the names of every unmapped module do.
"""

import collections
import csv
import functools
import os
import time
import urllib.request

import numpy as np
import tensorflow as tf

_V1 = tf.compat.v1

# tf.contrib.<path> -> the module that holds its names in TensorFlow 2.15 (what TensorFlow 1.15's file re-exported)
DEEP_MODULES = {
    "tpu.python.ops.tpu_ops": "tensorflow.python.tpu.ops.tpu_ops",
    "tpu.python.tpu.error_handling": "tensorflow_estimator.python.estimator.tpu.error_handling",
    "tpu.python.tpu.tpu_context": "tensorflow_estimator.python.estimator.tpu.tpu_context",
    "tpu.python.tpu.util": "tensorflow_estimator.python.estimator.tpu.util",
    "tpu.python.tpu.session_support": "tensorflow.python.tpu.session_support",
    "tpu.python.tpu.tensor_tracer": "tensorflow.python.tpu.tensor_tracer",
    "tpu.python.tpu.tpu_feed": "tensorflow.python.tpu.tpu_feed",
    "tpu.python.tpu.training_loop": "tensorflow.python.tpu.training_loop",
    "tpu.python.tpu.datasets": "tensorflow.python.tpu.datasets",
    "framework.python.ops.audio_ops": "tensorflow.python.ops.gen_audio_ops",
    "learn.python.learn.monitored_session": "tensorflow.python.training.monitored_session",
}


# ---------------------------------------------------------------------------------------------------
# tf.contrib.framework.python.framework.tensor_util

def reduce_sum_n(tensors, name=None):
    """The sum of every element of every tensor in `tensors` (a scalar)."""
    tensors = [tf.convert_to_tensor(tensor) for tensor in tensors]
    if not tensors:
        raise ValueError("reduce_sum_n: no tensors to sum")
    with _V1.name_scope(name, "reduce_sum_n", tensors) as scope:
        sums = [tf.reduce_sum(tensor) for tensor in tensors]
        return sums[0] if len(sums) == 1 else tf.add_n(sums, name=scope)


def remove_squeezable_dimensions(predictions, labels, name=None):
    """(predictions, labels) with a trailing size-1 dimension squeezed where the ranks differ by one."""
    from tensorflow.python.ops import confusion_matrix

    squeezed_labels, squeezed_predictions = confusion_matrix.remove_squeezable_dimensions(labels, predictions,
                                                                                          name=name)
    return squeezed_predictions, squeezed_labels


def assert_scalar_int(tensor, name=None):
    """`tensor` after checking it is a scalar of an integer dtype (ValueError when not)."""
    with _V1.name_scope(name, "assert_scalar_int", [tensor]):
        tensor = tf.convert_to_tensor(tensor)
        if not tensor.dtype.base_dtype.is_integer:
            raise ValueError(f"assert_scalar_int: expected an integer tensor, got {tensor.dtype.name} for {tensor}")
        return tf.debugging.assert_scalar(tensor)


def with_shape(expected_shape, tensor):
    """`tensor`, checked to have `expected_shape` (at graph construction when both are known, else when it runs)."""
    tensor = tf.convert_to_tensor(tensor)
    if isinstance(expected_shape, (list, tuple)) and tensor.shape.is_fully_defined():
        if tensor.shape.as_list() != list(expected_shape):
            raise ValueError(f"with_shape: {tensor.name} has shape {tensor.shape.as_list()}, expected "
                             f"{list(expected_shape)}")
        return tensor
    expected = tf.cast(tf.convert_to_tensor(expected_shape), tf.int32)
    check = tf.debugging.assert_equal(tf.shape(tensor), expected, message=f"with_shape: wrong shape for {tensor.name}")
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def with_same_shape(expected_tensor, tensor):
    """`tensor`, checked to have the shape of `expected_tensor`."""
    expected_tensor = tf.convert_to_tensor(expected_tensor)
    if expected_tensor.shape.is_fully_defined():
        return with_shape(expected_tensor.shape.as_list(), tensor)
    return with_shape(tf.shape(expected_tensor), tensor)


def tensor_util_names():
    from tensorflow.python.framework import sparse_tensor
    from tensorflow.python.ops import check_ops

    return {"assert_same_float_dtype": check_ops.assert_same_float_dtype, "assert_scalar": check_ops.assert_scalar,
            "assert_scalar_int": assert_scalar_int, "is_tensor": tf.is_tensor, "reduce_sum_n": reduce_sum_n,
            "convert_to_tensor_or_sparse_tensor": sparse_tensor.convert_to_tensor_or_sparse_tensor,
            "remove_squeezable_dimensions": remove_squeezable_dimensions, "with_shape": with_shape,
            "with_same_shape": with_same_shape}


# ---------------------------------------------------------------------------------------------------
# tf.contrib.learn.python.learn.datasets.base

Dataset = collections.namedtuple("Dataset", ["data", "target"])
Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


def load_csv_with_header(filename, target_dtype, features_dtype, target_column=-1):
    """Dataset(data, target) from a CSV file whose header row starts with the sample and feature counts."""
    with tf.io.gfile.GFile(filename) as handle:
        reader = csv.reader(handle)
        header = next(reader)
        n_samples, n_features = int(header[0]), int(header[1])
        data = np.zeros((n_samples, n_features), dtype=features_dtype)
        target = np.zeros((n_samples,), dtype=target_dtype)
        for index, row in enumerate(reader):
            target[index] = np.asarray(row.pop(target_column), dtype=target_dtype)
            data[index] = np.asarray(row, dtype=features_dtype)
    return Dataset(data=data, target=target)


def load_csv_without_header(filename, target_dtype, features_dtype, target_column=-1):
    """Dataset(data, target) from a CSV file with no header row."""
    with tf.io.gfile.GFile(filename) as handle:
        rows = [row for row in csv.reader(handle) if row]
    target = np.array([row.pop(target_column) for row in rows], dtype=target_dtype)
    return Dataset(data=np.array(rows, dtype=features_dtype), target=target)


def shrink_csv(filename, ratio):
    """Write every `ratio`-th line of `filename` to `<filename minus .csv>_shrink.csv` (the header kept)."""
    base, _ = os.path.splitext(filename)
    with tf.io.gfile.GFile(filename) as source, tf.io.gfile.GFile(base + "_shrink.csv", "w") as target:
        for index, line in enumerate(source):
            if index % ratio == 0:
                target.write(line)


def retry(initial_delay, max_delay, factor=2.0, jitter=0.25, is_retriable=None):
    """A decorator that retries a function on exceptions `is_retriable` accepts, with growing delays."""
    def decorator(function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            delay = initial_delay
            while True:
                try:
                    return function(*args, **kwargs)
                except Exception as error:  # noqa: BLE001 - the caller's predicate decides
                    if (is_retriable is not None and not is_retriable(error)) or delay > max_delay:
                        raise
                time.sleep(delay * (1 + jitter * np.random.uniform(-1, 1)))
                delay *= factor
        return wrapped
    return decorator


@retry(initial_delay=1.0, max_delay=16.0, is_retriable=lambda error: isinstance(error, OSError))
def urlretrieve_with_retry(url, filename=None):
    return urllib.request.urlretrieve(url, filename)


def maybe_download(filename, work_directory, source_url):
    """work_directory/filename, downloaded from source_url first when it is not there."""
    tf.io.gfile.makedirs(work_directory)
    filepath = os.path.join(work_directory, filename)
    if not tf.io.gfile.exists(filepath):
        temp_path, _ = urlretrieve_with_retry(source_url)
        tf.io.gfile.copy(temp_path, filepath)
    return filepath


def learn_datasets_base_names():
    return {"Dataset": Dataset, "Datasets": Datasets, "load_csv_with_header": load_csv_with_header,
            "load_csv_without_header": load_csv_without_header, "shrink_csv": shrink_csv, "retry": retry,
            "urlretrieve_with_retry": urlretrieve_with_retry, "maybe_download": maybe_download}


# ---------------------------------------------------------------------------------------------------
# Names of unmapped modules that scripts import beside code they may never run (a TPU input pipeline).

UNUSABLE_NAMES = {"cloud": ("BigQueryReader", "BigtableClient", "BigtableTable", "BlockCacheParams",
                            "ConfigureGcsHook", "configure_gcs")}


def unusable_names(module, message_for):
    """{name: stand-in} for UNUSABLE_NAMES[module]: each imports, and raises TF1ContribError(message_for(name))
    when it is called or instantiated, as the names of an unmapped tf.contrib module fail when used."""
    from npu_sim_bridge.tf1compat.errors import TF1ContribError

    def stand_in(name):
        message = message_for(name)

        def unusable(*args, **kwargs):
            raise TF1ContribError(message)
        unusable.__name__ = unusable.__qualname__ = name
        unusable.__doc__ = message
        unusable.__npu_sim_unusable__ = message  # `npu-sim check`: imports, and a call is missing (resolve.py)
        return unusable
    return {name: stand_in(name) for name in UNUSABLE_NAMES.get(module, ())}
