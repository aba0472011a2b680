"""tf.contrib.model_pruning: magnitude pruning of TF1 graphs (masks beside the weights, updated on a schedule).

apply_mask(weights) gives `weights * mask` with a `mask` (ones) and a `threshold` variable in the
current variable scope, recorded in the pruning collections. Pruning(hparams, global_step) builds
the op that, every `pruning_frequency` steps between `begin_pruning_step` and `end_pruning_step`,
sets each mask to |weights| > threshold, the threshold being the magnitude below which the scheduled
sparsity of the weights lies (sparsity grows from initial_sparsity to target_sparsity along
TensorFlow 1.15's polynomial schedule), smoothed by threshold_decay. Block pruning and per-layer
sparsity maps are not provided: hyperparameters asking for them raise ValueError.
"""

import tensorflow as tf

from npu_sim_bridge.tf1compat.hparams import HParams

_V1 = tf.compat.v1

MASK_COLLECTION = "masks"
THRESHOLD_COLLECTION = "thresholds"
MASKED_WEIGHT_COLLECTION = "masked_weights"
WEIGHT_COLLECTION = "kernel"
MASKED_WEIGHT_NAME = "weights/masked_weight"


def get_pruning_hparams():
    """The hyperparameters of Pruning, with TensorFlow 1.15's defaults."""
    return HParams(name="model_pruning", begin_pruning_step=0, end_pruning_step=-1, weight_sparsity_map=[""],
                   block_dims_map=[""], threshold_decay=0.0, pruning_frequency=10, nbins=256, block_height=1,
                   block_width=1, block_pooling_function="AVG", initial_sparsity=0.0, target_sparsity=0.5,
                   sparsity_function_begin_step=0, sparsity_function_end_step=100, sparsity_function_exponent=3.0,
                   use_tpu=False)


def apply_mask(x, scope=""):
    """`x * mask`, with `mask` and `threshold` variables created in variable scope `scope` (collections recorded)."""
    with _V1.variable_scope(scope):
        mask = _V1.get_variable("mask", x.get_shape(), initializer=_V1.ones_initializer(), trainable=False,
                                dtype=x.dtype)
        threshold = _V1.get_variable("threshold", [], initializer=_V1.zeros_initializer(), trainable=False,
                                     dtype=x.dtype)
    masked = tf.multiply(mask, x, name=MASKED_WEIGHT_NAME)
    for collection, value in ((MASK_COLLECTION, mask), (THRESHOLD_COLLECTION, threshold),
                              (MASKED_WEIGHT_COLLECTION, masked), (WEIGHT_COLLECTION, x)):
        if value not in _V1.get_collection(collection):
            _V1.add_to_collection(collection, value)
    return masked


def get_masks():
    return _V1.get_collection(MASK_COLLECTION)


def get_thresholds():
    return _V1.get_collection(THRESHOLD_COLLECTION)


def get_masked_weights():
    return _V1.get_collection(MASKED_WEIGHT_COLLECTION)


def get_weights():
    return _V1.get_collection(WEIGHT_COLLECTION)


def get_weight_sparsity():
    """The fraction of zeros of each mask."""
    return [tf.nn.zero_fraction(mask) for mask in get_masks()]


class Pruning:
    """The mask updates of TensorFlow 1.15's model_pruning for the weights apply_mask() recorded."""

    def __init__(self, spec=None, global_step=None, sparsity=None):
        self._spec = spec if spec is not None else get_pruning_hparams()
        for name, unsupported in (("weight_sparsity_map", [""]), ("block_dims_map", [""]), ("block_height", 1),
                                  ("block_width", 1)):
            if getattr(self._spec, name, unsupported) != unsupported:
                raise ValueError(f"model_pruning: {name}={getattr(self._spec, name)!r} (per-layer sparsity or block "
                                 "pruning) is not provided by npu_sim_bridge; leave it at its default")
        self._global_step = global_step if global_step is not None else _V1.train.get_or_create_global_step()
        self._sparsity = sparsity if sparsity is not None else self._scheduled_sparsity()
        with _V1.variable_scope(self._spec.name):
            self._last_update_step = _V1.get_variable("last_mask_update_step", [], dtype=tf.int32, trainable=False,
                                                      initializer=_V1.zeros_initializer())

    def _scheduled_sparsity(self):
        spec = self._spec
        with tf.name_scope(spec.name):
            begin, end = spec.sparsity_function_begin_step, spec.sparsity_function_end_step
            progress = tf.clip_by_value(tf.cast(self._global_step - begin, tf.float32) / float(max(end - begin, 1)),
                                        0.0, 1.0)
            decay = tf.pow(1.0 - progress, spec.sparsity_function_exponent)
            return tf.add(spec.target_sparsity, (spec.initial_sparsity - spec.target_sparsity) * decay,
                          name="sparsity")

    def _update_one(self, weights, mask, threshold):
        magnitudes = tf.reshape(tf.abs(weights), [-1])
        count = tf.size(magnitudes)
        k = tf.cast(tf.round(tf.cast(count, tf.float32) * self._sparsity), tf.int32)
        ascending = tf.sort(magnitudes)
        cut = tf.cond(k > 0, lambda: ascending[tf.minimum(k, count) - 1], lambda: tf.reduce_min(magnitudes) - 1.0)
        decay = self._spec.threshold_decay
        new_threshold = decay * threshold + (1.0 - decay) * tf.cast(cut, threshold.dtype)
        new_mask = tf.cast(tf.abs(weights) > new_threshold, mask.dtype)
        return [_V1.assign(threshold, new_threshold), _V1.assign(mask, new_mask)]

    def mask_update_op(self):
        """One op updating every mask and threshold now."""
        with tf.name_scope(self._spec.name):
            updates = [update for weights, mask, threshold in zip(get_weights(), get_masks(), get_thresholds())
                       for update in self._update_one(weights, mask, threshold)]
            return tf.group(*updates, name="mask_update")

    def conditional_mask_update_op(self):
        """An op updating the masks when the schedule says so (every pruning_frequency steps in the window)."""
        spec = self._spec
        step = tf.cast(self._global_step, tf.int32)
        in_window = step >= spec.begin_pruning_step
        if spec.end_pruning_step >= 0:
            in_window = tf.logical_and(in_window, step <= spec.end_pruning_step)
        due = tf.logical_and(in_window, step - self._last_update_step >= spec.pruning_frequency)

        def update():
            with tf.control_dependencies([self.mask_update_op()]):
                return tf.group(_V1.assign(self._last_update_step, step))

        return tf.cond(due, update, tf.no_op, name="conditional_mask_update")

    def add_pruning_summaries(self):
        """Scalar summaries of the sparsity, and of each mask's zero fraction and threshold."""
        with tf.name_scope(self._spec.name + "_summaries"):
            _V1.summary.scalar("sparsity", self._sparsity)
            for mask, threshold in zip(get_masks(), get_thresholds()):
                name = mask.op.name.replace("/", "_")
                _V1.summary.scalar(name + "/sparsity", tf.nn.zero_fraction(mask))
                _V1.summary.scalar(threshold.op.name.replace("/", "_") + "/threshold", threshold)

    def print_hparams(self):
        _V1.logging.info(self._spec.to_json() if hasattr(self._spec, "to_json") else str(self._spec.values()))


def pruning_names():
    return {"get_pruning_hparams": get_pruning_hparams, "apply_mask": apply_mask, "Pruning": Pruning,
            "get_masks": get_masks, "get_thresholds": get_thresholds, "get_masked_weights": get_masked_weights,
            "get_weights": get_weights, "get_weight_sparsity": get_weight_sparsity,
            "MASK_COLLECTION": MASK_COLLECTION, "THRESHOLD_COLLECTION": THRESHOLD_COLLECTION,
            "MASKED_WEIGHT_COLLECTION": MASKED_WEIGHT_COLLECTION, "WEIGHT_COLLECTION": WEIGHT_COLLECTION}
