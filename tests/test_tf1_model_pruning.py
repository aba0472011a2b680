"""tf.contrib.model_pruning (tf1compat/model_pruning.py): masks beside the weights, updated on TF 1.15's schedule.

In-process, inside tf.Graph blocks (the import hook is not needed for the module itself).
"""

import numpy as np
import pytest
import tensorflow as tf

from npu_sim_bridge.tf1compat import contrib, model_pruning

V1 = tf.compat.v1


def _pruned_weights(steps, **hparams):
    """The masked weights [1..8] (2x4) after each of `steps` conditional updates, one global step apart."""
    spec = model_pruning.get_pruning_hparams()
    for name, value in hparams.items():
        setattr(spec, name, value)
    with tf.Graph().as_default():
        weights = V1.get_variable("w", initializer=np.arange(1, 9, dtype=np.float32).reshape(2, 4))
        masked = model_pruning.apply_mask(weights, "layer")
        step = V1.train.get_or_create_global_step()
        update = model_pruning.Pruning(spec, global_step=step).conditional_mask_update_op()
        advance = V1.assign_add(step, 1)
        seen = []
        with V1.Session() as session:
            session.run(V1.global_variables_initializer())
            for _ in range(steps):
                session.run(update)
                seen.append(session.run(masked))
                session.run(advance)
        return seen, [v.op.name for v in model_pruning.get_masks()], [v.op.name for v in model_pruning.get_thresholds()]


def test_masks_follow_the_polynomial_sparsity_schedule_every_pruning_frequency_steps():
    seen, masks, thresholds = _pruned_weights(4, target_sparsity=0.75, pruning_frequency=1,
                                              sparsity_function_end_step=2)
    assert masks == ["layer/mask"] and thresholds == ["layer/threshold"]
    kept = [int(np.count_nonzero(weights)) for weights in seen]
    # step 0: no update yet; step 1: 0.75 * (1 - 0.5**3) of 8 pruned -> 5 (the smallest); step 2 on: 0.75 -> 6
    assert kept == [8, 3, 2, 2]
    np.testing.assert_array_equal(seen[-1], [[0, 0, 0, 0], [0, 0, 7, 8]])


def test_no_update_outside_the_pruning_window():
    seen, _, _ = _pruned_weights(3, target_sparsity=0.5, pruning_frequency=1, begin_pruning_step=5)
    assert [int(np.count_nonzero(weights)) for weights in seen] == [8, 8, 8]


def test_block_pruning_says_it_is_not_provided():
    with tf.Graph().as_default(), pytest.raises(ValueError, match="block_height=2 .*not provided"):
        spec = model_pruning.get_pruning_hparams()
        spec.block_height = 2
        model_pruning.Pruning(spec, global_step=V1.train.get_or_create_global_step())


def test_the_contrib_paths_are_this_module():
    assert contrib.import_contrib(["model_pruning", "python", "pruning"]).Pruning is model_pruning.Pruning
    assert contrib.contrib_module().model_pruning.apply_mask is model_pruning.apply_mask
