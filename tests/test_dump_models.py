"""Dumps and compare on the model sweep's graphs (the fast subset; benchmarks/bench_dump_models.py runs all):
the TF1 batch-norm CNN (training placeholder, tf.cond dropout) and a Keras application, under Session and Estimator."""

import pytest

from npu_sim_bridge.testing import dump_sweep


def assert_complete(check, steps=(0, 1)):
    """Every tensor listed has a file at each step asked for, or did not run (a cond branch not taken)."""
    assert check.listed > 0
    for step in steps:
        assert check.written[step] > 0, (check.model, check.mode, step)
        assert not check.lost[step], (check.model, check.mode, step, check.missing[step])
        assert set(check.missing[step]) <= {"branch not taken"}
        if check.runner == "session":   # against TensorFlow's step stats: every op that ran was dumped
            assert check.dumped_ops_ran[step] > 0 and check.ran_not_dumped[step] == []


def first_divergent(reference, other):
    result = dump_sweep.compare_modes(reference, other)
    assert result.first_divergent is not None, "float32 and mixed precision dumps should differ"
    pair, row = result.first_divergent
    return result, row


@pytest.mark.parametrize("name", ["tf1_batchnorm_cnn", "VGG16"])
def test_session_dumps_every_op_that_ran_and_compare_finds_the_first_divergent_op(tmp_path, name):
    build = dump_sweep.small_models()[name]
    model = build()
    checks = [dump_sweep.session_dump(name, None, mode, str(tmp_path / mode), model=model) for mode in ("float32",
                                                                                                      "mixed")]
    for check in checks:
        assert_complete(check)
    if name == "tf1_batchnorm_cnn":  # the batch norms' inference branches and the dropout's identity branch
        assert checks[0].missing[0]["branch not taken"] == checks[1].missing[0]["branch not taken"] > 0
    result, row = first_divergent(*checks)
    assert row.step == 0 and row.type_b in ("Conv2D", "_FusedConv2D"), (row.op, row.type_b)
    assert row.op.startswith("conv2d/") or row.op.startswith("block1_conv1/")   # the first convolution


@pytest.mark.parametrize("name", ["cnn", "VGG16"])
def test_estimator_dumps_and_compare(tmp_path, name):
    if name == "cnn":
        model_fn, input_fn = dump_sweep.cnn_model_fn, dump_sweep.image_input_fn()
    else:
        model_fn, input_fn = dump_sweep.keras_application_model_fn("VGG16"), dump_sweep.image_input_fn(32, 4)
    checks = [dump_sweep.estimator_dump(name, model_fn, input_fn, mode, str(tmp_path / mode))
              for mode in ("float32", "mixed")]
    for check in checks:
        assert_complete(check)
    result, row = first_divergent(*checks)
    assert row.step == 0 and not row.note


def test_overflow_on_the_cnn_is_flagged_at_the_rounding_before_the_first_convolution(tmp_path):
    """The issue's graph: images scaled by 3e5 at step 1 overflow in the float16 rounding the precision pass
    puts before conv2d/Conv2D (the images are a host placeholder, so the rounding is the first device op)."""
    import numpy as np
    import tensorflow as tf

    from npu_sim_bridge.dumps import read_overflow

    model = dump_sweep.small_models()["tf1_batchnorm_cnn"]()
    config = dump_sweep.npu_config("mixed", str(tmp_path), enable_dump=False, enable_dump_debug=True)
    losses = []
    with tf.compat.v1.Session(graph=model.graph, config=config) as sess:
        sess.run(model.init_op)
        for step in range(3):
            feed = model.feed(np.random.default_rng(step))
            if step == 1:
                feed[model.inputs["images"]] = feed[model.inputs["images"]] * 3e5 + 1.0
            losses.append(sess.run([model.loss, model.train_op], feed)[0])
    assert np.isfinite(losses[0]) and not np.isfinite(losses[1])
    records = read_overflow(str(tmp_path))
    assert records[0]["step"] == 1
    first = records[0]["first"]
    assert first["type"] in ("NpuSimRoundToFloat16", "Cast") and first["inserted_by"] == "precision"
    assert first["producer"] == "images" and "conv2d/Conv2D" in first["consumers"] and first["dtype"] == "float16"
