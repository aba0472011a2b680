"""Keras route: set_keras_session_npu_config and npu_clear_session give Keras a Session with the NpuOptimizer.

On TensorFlow 2.15 two Keras backends exist: tf.keras (the keras 2.15 package, what models are
built with) and tensorflow.python.keras (TensorFlow's old copy, which migrated scripts still
import as `K`). The Session is set on both, so whichever the script uses trains through the
NpuOptimizer. Keras in TF1 graph mode needs Keras "legacy" optimizers (tf.keras.optimizers.legacy.*,
or tf.compat.v1.keras.optimizers.*); tf.compat.v1.train optimizers work too.
"""

import sys
import weakref

import tensorflow as tf
from tensorflow.python.client import session as session_lib

from npu_sim_bridge.runtime.session import _check_config_proto, find_npu_optimizer, npu_config_proto

_OLD_KERAS_BACKEND = "tensorflow.python.keras.backend"
_last_session = None  # weak reference to the Session the helpers last gave Keras


def _backends():
    backends = [tf.compat.v1.keras.backend]
    old = sys.modules.get(_OLD_KERAS_BACKEND)
    if old is not None and old is not tf.compat.v1.keras.backend:
        backends.append(old)
    return backends


def set_keras_session(sess):
    """Make `sess` the Session of tf.keras and of tensorflow.python.keras (when loaded)."""
    global _last_session
    for backend in _backends():
        backend.set_session(sess)
    _last_session = weakref.ref(sess)


def keras_session_without_precision_mode():
    """The Session the helpers last gave Keras, if still open and its NpuOptimizer sets no precision mode."""
    sess = _last_session() if _last_session is not None else None
    if sess is None or sess._closed:  # pylint: disable=protected-access
        return None
    npu_optimizer = find_npu_optimizer(sess._config)  # pylint: disable=protected-access
    parameters = npu_optimizer.parameter_map if npu_optimizer is not None else {}
    if "precision_mode" in parameters or "precision_mode_v2" in parameters:
        return None
    return sess


def set_keras_session_npu_config(config=None):
    """Build a Session on the default graph with npu_config_proto(config), make it Keras's Session, return it.

    `config` is mutated by npu_config_proto, as npu_bridge does.
    """
    config = npu_config_proto(_check_config_proto(config, "set_keras_session_npu_config"))
    sess = session_lib.Session(config=config)
    set_keras_session(sess)
    return sess


def npu_clear_session(config=None):
    """keras clear_session(), then a new Keras Session with npu_config_proto(config) on the new default graph."""
    config = _check_config_proto(config, "npu_clear_session")
    for backend in _backends():
        backend.clear_session()
    sess = session_lib.Session(config=npu_config_proto(config))
    set_keras_session(sess)
    return sess
