"""TensorFlow 1.15 Keras names and attributes that Keras 2.15 renamed or dropped, for TF1 scripts.

KERAS_TABLE feeds internals.TABLE (module names reached through tensorflow.python.keras or tf.keras);
add_model_attributes() gives Keras layers and models TensorFlow 1.15's private attributes (`_layers`,
`_convolution_op`, ...: keras_attributes.py) while `npu-sim run` runs a TF1 script.
"""

import importlib
import types
import warnings

from npu_sim_bridge.tf1compat.errors import TF1CompatWarning


def _attr(module_name, name):
    return lambda: getattr(importlib.import_module(module_name), name)


def multi_gpu_model(model, gpus=None, cpu_merge=True, cpu_relocation=False):  # pylint: disable=unused-argument
    """keras.utils.multi_gpu_model of TensorFlow 1.15, on one simulated device: returns `model` itself."""
    warnings.warn("multi_gpu_model is accepted without effect: the simulation runs on one device, so the model is "
                  "returned unchanged (on several devices, use tf.distribute.MirroredStrategy)", TF1CompatWarning,
                  stacklevel=2)
    return model


multi_gpu_model.__npu_sim_no_effect__ = "the simulation runs on one device: the model is returned unchanged"


def _mixed_precision_experimental():
    """keras.mixed_precision.experimental (TF 2.1-2.3): Policy, set_policy, global_policy, LossScaleOptimizer."""
    policy = importlib.import_module("keras.src.mixed_precision.policy")
    loss_scale = importlib.import_module("keras.src.mixed_precision.loss_scale_optimizer")
    module = types.ModuleType("keras.mixed_precision.experimental", _mixed_precision_experimental.__doc__)
    module.Policy = policy.Policy
    module.set_policy = policy.set_global_policy
    module.global_policy = policy.global_policy
    module.LossScaleOptimizer = loss_scale.LossScaleOptimizer
    return module


def _impl_namespace():
    """tensorflow.python.keras._impl (TensorFlow 1.4-1.8's layout, gone by 1.15): its `keras` is Keras 2.15.
    A script reaches it through the view (python_view.py), which gives its `keras` as the view of keras.src."""
    module = types.ModuleType("tensorflow.python.keras._impl", _impl_namespace.__doc__)
    module.keras = importlib.import_module("keras.src")
    return module


def _network_module():
    """tensorflow.python.keras.engine.network (TensorFlow 1.15): its Network is Keras 2.15's Functional."""
    functional = importlib.import_module("keras.src.engine.functional")
    module = types.ModuleType("tensorflow.python.keras.engine.network", _network_module.__doc__)
    module.Network = functional.Functional
    return module


_IMAGE_UTILS = "keras.src.utils.image_utils"
_EXPERIMENTAL = ("keras.mixed_precision.experimental (Policy, set_policy = set_global_policy, ...)",
                 _mixed_precision_experimental)

KERAS_TABLE = {
    "keras.src": {"_impl": ("keras (the pre-1.9 tensorflow.python.keras._impl.keras layout)", _impl_namespace)},
    "keras.src.preprocessing.sequence": {
        "pad_sequences": ("keras.utils.pad_sequences", _attr("keras.src.utils.data_utils", "pad_sequences")),
    },
    "keras.src.preprocessing.image": {
        name: (f"keras.utils.{name}", _attr(_IMAGE_UTILS, name))
        for name in ("load_img", "img_to_array", "array_to_img", "save_img")},
    "keras.src.layers.normalization": {
        "BatchNormalization": ("keras.layers.BatchNormalization",
                               _attr("keras.src.layers.normalization.batch_normalization", "BatchNormalization")),
        "LayerNormalization": ("keras.layers.LayerNormalization",
                               _attr("keras.src.layers.normalization.layer_normalization", "LayerNormalization")),
    },
    "keras.src.engine": {"network": ("keras.src.engine.functional (Network is Functional)", _network_module)},
    "keras.src.utils": {
        "multi_gpu_model": ("nothing (one simulated device): the model itself", lambda: multi_gpu_model),
    },
    "keras.src.mixed_precision": {"experimental": _EXPERIMENTAL},
    "keras.api._v1.keras.mixed_precision": {"experimental": _EXPERIMENTAL},
    "keras.api._v2.keras.mixed_precision": {"experimental": _EXPERIMENTAL},
}


def add_model_attributes():
    """Give Keras 2.15's classes TensorFlow 1.15's private attributes (Layer/Model._layers, Conv._convolution_op, ...).

    The attributes and why are keras_attributes.py's; this name stays the one hook.py calls.
    """
    from npu_sim_bridge.tf1compat.keras_attributes import add_keras_attributes

    add_keras_attributes()
