"""Small tf.contrib modules on TensorFlow 2.15: predictor, eager, util.loader, distribute, tpu.proto, tensorboard,
distributions.MultivariateNormalDiag, integrate (odeint.py).

predictor.from_saved_model loads a SavedModel into its own graph and session and runs one signature
as a function of a dict of inputs. MultivariateNormalDiag is independent normals over the last axis.
The others are TensorFlow 2.15's and TensorBoard's own names.
"""

import math

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


class MultivariateNormalDiag:
    """A Gaussian over the last axis with covariance diag(scale_diag ** 2) (times scale_identity_multiplier ** 2).

    loc [..., k] (zeros when None), scale_diag [..., k] (ones when None); batch axes broadcast.
    """

    def __init__(self, loc=None, scale_diag=None, scale_identity_multiplier=None, validate_args=False,
                 allow_nan_stats=True, name="MultivariateNormalDiag"):
        del allow_nan_stats
        if loc is None and scale_diag is None:
            raise ValueError("MultivariateNormalDiag: give loc or scale_diag (the event size comes from them)")
        with tf.name_scope(name):
            self._loc = tf.convert_to_tensor(loc) if loc is not None else None
            dtype = self._loc.dtype if self._loc is not None else tf.convert_to_tensor(scale_diag).dtype
            scale = tf.ones_like(self._loc) if scale_diag is None else tf.convert_to_tensor(scale_diag, dtype)
            if scale_identity_multiplier is not None:
                scale = scale * tf.convert_to_tensor(scale_identity_multiplier, dtype)
            if validate_args:
                check = tf.debugging.assert_positive(scale, message="MultivariateNormalDiag: scale_diag must be "
                                                                    "positive")
                with tf.control_dependencies([check]):
                    scale = tf.identity(scale)
            self._scale = scale
            self._loc = tf.zeros_like(scale) if self._loc is None else self._loc + tf.zeros_like(scale)
        self._name = name

    loc = property(lambda self: self._loc)
    scale_diag = property(lambda self: self._scale)

    def mean(self, name="mean"):
        return tf.identity(self._loc, name=name)

    mode = mean

    def stddev(self, name="stddev"):
        return tf.identity(self._scale, name=name)

    def variance(self, name="variance"):
        return tf.square(self._scale, name=name)

    def covariance(self, name="covariance"):
        return tf.linalg.diag(tf.square(self._scale), name=name)

    def log_prob(self, value, name="log_prob"):
        with tf.name_scope(name):
            z = (tf.convert_to_tensor(value, self._loc.dtype) - self._loc) / self._scale
            return -tf.reduce_sum(0.5 * tf.square(z) + tf.math.log(self._scale) + 0.5 * math.log(2 * math.pi), -1)

    def prob(self, value, name="prob"):
        return tf.exp(self.log_prob(value), name=name)

    def entropy(self, name="entropy"):
        with tf.name_scope(name):
            return tf.reduce_sum(0.5 * math.log(2 * math.pi * math.e) + tf.math.log(self._scale), -1)

    def sample(self, sample_shape=(), seed=None, name="sample"):
        with tf.name_scope(name):
            shape = tf.concat([tf.reshape(tf.convert_to_tensor(sample_shape, tf.int32), [-1]),
                               tf.shape(self._loc)], 0)
            return self._loc + self._scale * tf.random.normal(shape, dtype=self._loc.dtype, seed=seed)

    def kl_divergence(self, other, name="kl_divergence"):
        """KL(self || other) for another MultivariateNormalDiag."""
        with tf.name_scope(name):
            ratio = tf.square(self._scale / other.scale_diag)
            gap = tf.square((self._loc - other.loc) / other.scale_diag)
            return 0.5 * tf.reduce_sum(ratio + gap - 1.0 - tf.math.log(ratio), -1)


def distributions_names():
    return {"MultivariateNormalDiag": MultivariateNormalDiag}


def training_names():
    from npu_sim_bridge.tf1compat import bucketing

    return {"bucket": bucketing.bucket, "bucket_by_sequence_length": bucketing.bucket_by_sequence_length}


def integrate_names():
    from npu_sim_bridge.tf1compat.odeint import odeint

    return {"odeint": odeint}


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
