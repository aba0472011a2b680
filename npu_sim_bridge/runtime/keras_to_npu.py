"""npu_bridge.estimator.npu.keras_to_npu: model_to_npu_estimator, a compiled Keras model as an Estimator on the NPU.

Built on TensorFlow's own Keras-to-Estimator conversion (tf.compat.v1.keras.estimator.model_to_estimator)
with the NPURunConfig's session config (NpuOptimizer and its options), so every graph the Estimator
builds goes through the simulated NPU as an NPUEstimator's would.
"""

import tensorflow as tf

from npu_sim_bridge.runtime.estimator import NPURunConfig


def model_to_npu_estimator(keras_model=None, keras_model_path=None, custom_objects=None, model_dir=None,
                           checkpoint_format="saver", config=None, job_start_file=""):
    """An Estimator training and evaluating `keras_model` (or the model saved at keras_model_path) on the NPU."""
    del job_start_file  # names a file the NPU job waits for; there is no job to wait for here
    if config is None:
        config = NPURunConfig(model_dir=model_dir)
    if not isinstance(config, NPURunConfig):
        raise ValueError(f"model_to_npu_estimator needs config=NPURunConfig(...), got {type(config).__name__}")
    run_config = config.replace(session_config=config.npu_session_config())
    return tf.compat.v1.keras.estimator.model_to_estimator(
        keras_model=keras_model, keras_model_path=keras_model_path, custom_objects=custom_objects,
        model_dir=model_dir, config=run_config, checkpoint_format=checkpoint_format)
