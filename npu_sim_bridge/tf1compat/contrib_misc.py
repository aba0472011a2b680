"""Small tf.contrib modules on TensorFlow 2.15: predictor, eager, util.loader, distribute, tpu.proto, tensorboard.

predictor.from_saved_model loads a SavedModel into its own graph and session and runs one signature
as a function of a dict of inputs. The others are TensorFlow 2.15's and TensorBoard's own names.
"""

import tensorflow as tf

_V1 = tf.compat.v1


class SavedModelPredictor:
    """tf.contrib.predictor's predictor: predictor({input key: value}) -> {output key: value} for one signature."""

    def __init__(self, export_dir, signature_def_key=None, signature_def=None, input_names=None, output_names=None,
                 tags=None, graph=None, config=None):
        self._graph = graph or tf.Graph()
        self._session = _V1.Session(graph=self._graph, config=config)
        tags = [tags] if isinstance(tags, str) else list(tags or [tf.saved_model.SERVING])
        with self._graph.as_default():
            meta_graph = _V1.saved_model.loader.load(self._session, tags, export_dir)
        if signature_def is None:
            key = signature_def_key or tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
            if key not in meta_graph.signature_def:
                raise ValueError(f"from_saved_model: {export_dir} has no signature {key!r}; it has "
                                 f"{sorted(meta_graph.signature_def)} (pass signature_def_key)")
            signature_def = meta_graph.signature_def[key]
        inputs = input_names or {name: info.name for name, info in signature_def.inputs.items()}
        outputs = output_names or {name: info.name for name, info in signature_def.outputs.items()}
        self._feed_tensors = {name: self._graph.get_tensor_by_name(tensor) for name, tensor in inputs.items()}
        self._fetch_tensors = {name: self._graph.get_tensor_by_name(tensor) for name, tensor in outputs.items()}

    graph = property(lambda self: self._graph)
    session = property(lambda self: self._session)
    feed_tensors = property(lambda self: dict(self._feed_tensors))
    fetch_tensors = property(lambda self: dict(self._fetch_tensors))

    def __call__(self, input_dict):
        unknown = set(input_dict) - set(self._feed_tensors)
        if unknown:
            raise ValueError(f"predictor: unknown input keys {sorted(unknown)}; the signature takes "
                             f"{sorted(self._feed_tensors)}")
        feed = {self._feed_tensors[name]: value for name, value in input_dict.items()}
        return self._session.run(self._fetch_tensors, feed_dict=feed)


def from_saved_model(export_dir, signature_def_key=None, signature_def=None, input_names=None, output_names=None,
                     tags=None, graph=None, config=None):
    """tf.contrib.predictor.from_saved_model: a predictor for one signature of the SavedModel in export_dir."""
    return SavedModelPredictor(export_dir, signature_def_key, signature_def, input_names, output_names, tags, graph,
                               config)


def predictor_names():
    return {"from_saved_model": from_saved_model}


def eager_names():
    return {"in_eager_mode": tf.executing_eagerly, "executing_eagerly": tf.executing_eagerly,
            "num_gpus": lambda: len(tf.config.list_physical_devices("GPU"))}


def util_loader_names():
    return {"load_op_library": tf.load_op_library}


def distribute_names():
    return {"CollectiveAllReduceStrategy": _V1.distribute.experimental.MultiWorkerMirroredStrategy}


DEEP_MODULES = {
    **{f"tpu.proto.{name}": f"tensorflow.core.protobuf.tpu.{name}" for name in (
        "compilation_result_pb2", "topology_pb2", "tpu_embedding_configuration_pb2", "optimization_parameters_pb2",
        "dynamic_padding_pb2")},
    "tensorboard.plugins.projector": "tensorboard.plugins.projector",
    "keras.python.keras": "keras.api._v1.keras",
}

DIFFERENCES = {
    "distribute.CollectiveAllReduceStrategy": "is tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy "
                                              "(the workers come from TF_CONFIG)",
    "keras.python.keras": "is tf.compat.v1.keras (Keras 2.15)",
}
