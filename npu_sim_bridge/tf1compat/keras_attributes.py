"""TensorFlow 1.15's private Keras attributes that Keras 2.15 renamed or dropped, which TF1 scripts use.

Custom layers of TF 1.15 scripts reach into Keras internals (keras-tcn walks `layer._layers` and edits
`model._layers`; Conv2D subclasses call `self._convolution_op(inputs, kernel)`). Keras 2.15 renamed or
dropped these, so such a script stops with `AttributeError: 'TCN' object has no attribute '_layers'`.
add_keras_attributes() puts them back on Keras 2.15's classes while `npu-sim run` runs a TF1 script
(keras_compat.add_model_attributes, called by hook.py):

  Layer._layers              the layer's tracked sublayers, the live list Keras 2.15 calls
                             `_self_tracked_trackables` (so appending to it or clearing it acts, as in 1.15)
  Layer._call_fn_args        the names of call()'s arguments (Keras 2.15: `_call_spec.arg_names`)
  Functional._layers_by_depth  {depth: [layers]} of a model built from inputs and outputs
  Conv._convolution_op       `op(inputs, kernel)`: the layer's plain convolution (Keras 2.15:
                             `convolution_op`); one a script assigns is what the layer's call() then uses
  Conv._compute_causal_padding()  TF 1.15's form without arguments (Keras 2.15 needs the inputs)

The ones TF 1.15 code also assigns (`_layers`, `_call_fn_args`, `_convolution_op`) keep what it assigns. An
attribute Keras 2.15 already has is never replaced; Conv's `convolution_op` and `_compute_causal_padding`
are wrapped (once), to honour an assigned `_convolution_op` and to take no inputs.
"""

import functools
import importlib

import tensorflow as tf

_PATCHED = "__npu_sim_tf115__"


def _keeping_assigned(name, compute, doc):
    """A property giving what this object was assigned under `name`, else compute(obj)."""

    def get(obj):
        try:
            return obj.__dict__[name]
        except KeyError:
            return compute(obj)

    def assign(obj, value):
        obj.__dict__[name] = value

    def forget(obj):
        obj.__dict__.pop(name, None)

    return property(get, assign, forget, doc)


def _tracked_sublayers(layer):
    tracked = getattr(layer, "_self_tracked_trackables", None)
    return tracked if tracked is not None else []


def _call_fn_args(layer):
    return tuple(layer._call_spec.arg_names)  # pylint: disable=protected-access


def _layers_by_depth(model):
    if not getattr(model, "_is_graph_network", False):
        raise AttributeError(
            f"{type(model).__name__!r} object has no attribute '_layers_by_depth': TensorFlow 1.15 had it only on "
            "models built from inputs and outputs (functional or built Sequential models); for this model walk "
            "model.layers instead")
    functional = importlib.import_module("keras.src.engine.functional")
    return dict(functional._map_graph_network(model.inputs, model.outputs)[3])  # pylint: disable=protected-access


def _add(cls, name, descriptor):
    if not hasattr(cls, name):
        setattr(cls, name, descriptor)


def _patch_conv(conv):
    """Conv._convolution_op and the argument-less _compute_causal_padding() of TensorFlow 1.15."""
    if getattr(conv.convolution_op, _PATCHED, False):
        return
    plain_convolution = conv.convolution_op
    causal_padding = conv._compute_causal_padding  # pylint: disable=protected-access

    @functools.wraps(plain_convolution)
    def convolution_op(self, inputs, kernel):
        assigned = self.__dict__.get("_convolution_op")
        if assigned is not None:  # TF 1.15's Conv.call used self._convolution_op, whatever the script put there
            return assigned(inputs, kernel)
        return plain_convolution(self, inputs, kernel)

    @functools.wraps(causal_padding)
    def _compute_causal_padding(self, inputs=None):
        return causal_padding(self, _UnknownRank() if inputs is None else inputs)  # TF 1.15 took no inputs

    setattr(convolution_op, _PATCHED, True)
    conv.convolution_op = convolution_op
    conv._compute_causal_padding = _compute_causal_padding  # pylint: disable=protected-access
    _add(conv, "_convolution_op", _keeping_assigned(
        "_convolution_op", lambda layer: functools.partial(plain_convolution, layer),
        "TensorFlow 1.15's convolution op of the layer: op(inputs, kernel)."))


class _UnknownRank:
    """Inputs of unknown rank: Keras 2.15's causal padding then pads one batch dimension, as TF 1.15's did."""

    shape = tf.TensorShape(None)


def add_keras_attributes():
    """Give Keras 2.15's Layer, Functional and Conv the TensorFlow 1.15 attributes above. Idempotent."""
    base_layer = importlib.import_module("keras.src.engine.base_layer")
    functional = importlib.import_module("keras.src.engine.functional")
    base_conv = importlib.import_module("keras.src.layers.convolutional.base_conv")
    _add(base_layer.Layer, "_layers", _keeping_assigned(
        "_layers", _tracked_sublayers, "TensorFlow 1.15's tracked sublayers (Keras 2.15: _self_tracked_trackables)."))
    _add(base_layer.Layer, "_call_fn_args", _keeping_assigned(
        "_call_fn_args", _call_fn_args, "TensorFlow 1.15's names of call()'s arguments."))
    _add(functional.Functional, "_layers_by_depth", property(
        _layers_by_depth, doc="TensorFlow 1.15's {depth: [layers]} of a graph network."))
    _patch_conv(base_conv.Conv)
