"""The model sweep is estimated at its usual training sizes (benchmarks/bench_estimate.py runs all of it); one
small Keras application here: built at 224x224 and the batch the table gives, its first convolution costed at
the FLOPs of that size."""

import pytest

from npu_sim_bridge.estimate import estimate
from npu_sim_bridge.estimate.sweep import APPLICATIONS, PUBLISHED, sweep_models
from npu_sim_bridge.testing import zoo

MIXED = {"precision_mode": "allow_mix_precision", "iterations_per_loop": "100"}


def test_every_keras_application_of_the_sweep_has_a_training_size_and_batch():
    models = sweep_models()
    assert set(zoo.KERAS_APPLICATIONS) <= set(APPLICATIONS)
    for name in zoo.KERAS_APPLICATIONS:
        size, batch, _ = APPLICATIONS[name]
        assert size >= 224 and batch >= 32 and models[name].batch == batch
    for extra in ("resnet50_b256", "bert_base_b32", "bert_large_b96"):
        assert extra in models
    for name, figure in PUBLISHED.items():  # a published figure compares like with like: same batch
        assert models[name].batch == figure.batch, name


def test_a_small_keras_application_is_estimated_at_224():
    model = sweep_models()["MobileNetV3Small"]
    step = estimate(model.build().meta_graph_def(), MIXED, batch=model.batch)
    assert model.size == "224x224" and step.batch == model.batch == 256
    # Keras's first layer "Conv": 3x3, stride 2, 3 -> 16 channels; at 224 the output is 112x112.
    first = [o for o in step.ops if o.record.work.unit == "cube" and o.record.name.startswith("Conv/")]
    assert first, "the first convolution runs on the cube"
    assert first[0].record.work.flops == pytest.approx(2 * 256 * 112 * 112 * 16 * 3 * 3 * 3)
    assert step.samples_per_s == pytest.approx(256 / (step.step_us * 1e-6))
