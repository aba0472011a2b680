"""npu_init's config helpers, NPURunConfig / NPUEstimator, npu_scope, and the every-Session opt-in."""

import warnings

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

import npu_sim_bridge
from npu_sim_bridge import npu_init
from npu_sim_bridge.config import KEYS, from_config_proto, from_dict
from npu_sim_bridge.runtime import session as session_lib
from npu_sim_bridge.tf1compat.view import tf1_module
from npu_sim_bridge.runtime import util

SPEC_NAMES = (
    "npu_config_proto", "npu_run_config_init", "NPURunConfig", "NPUEstimator", "NPUEstimatorSpec",
    "set_keras_session_npu_config", "init_resource", "shutdown_resource", "close_session", "npu_clear_session",
    "RewriterConfig", "npu_scope", "NPULossScaleOptimizer", "FixedLossScaleManager",
    "ExponentialUpdateLossScaleManager", "NPUDistributedOptimizer", "npu_distributed_optimizer_wrapper",
    "npu_tf_optimizer", "npu_keras_optimizer", "util", "DumpConfig", "get_rank_size", "get_rank_id",
    "get_local_rank_id", "tf",
)


def _npu_optimizers(config):
    return [c for c in config.graph_options.rewrite_options.custom_optimizers if c.name == "NpuOptimizer"]


def test_star_import_gives_the_spec_names_and_tf1_api():
    namespace = {}
    exec("from npu_sim_bridge.npu_init import *", namespace)  # noqa: S102 - what migrated scripts do
    missing = [name for name in SPEC_NAMES if name not in namespace]
    assert missing == []
    # `tf` is the TF1 API: tf.compat.v1's names plus tf.contrib (npu_sim_bridge.tf1compat)
    assert namespace["tf"] is tf1_module() and namespace["tf"].ConfigProto is tf.compat.v1.ConfigProto
    assert namespace["RewriterConfig"] is RewriterConfig
    assert (namespace["get_rank_size"](), namespace["get_rank_id"](), namespace["get_local_rank_id"]()) == (1, 0, 0)


def test_npu_config_proto_adds_npu_optimizer_and_sets_the_real_options():
    config = tf.compat.v1.ConfigProto(allow_soft_placement=False, log_device_placement=True)
    returned = npu_init.npu_config_proto(config)
    assert returned is config
    assert len(_npu_optimizers(config)) == 1
    rewrite = config.graph_options.rewrite_options
    assert rewrite.memory_optimization == RewriterConfig.OFF
    assert rewrite.remapping == RewriterConfig.OFF
    assert config.allow_soft_placement and not config.log_device_placement
    assert config.graph_options.optimizer_options.global_jit_level == tf.compat.v1.OptimizerOptions.OFF
    assert len(_npu_optimizers(npu_init.npu_config_proto())) == 1


def test_npu_config_proto_keeps_an_existing_npu_optimizer_and_memory_optimization(npu_config):
    config = npu_config(precision_mode="force_fp32")
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.HEURISTICS
    npu_init.npu_config_proto(config)
    (custom_op,) = _npu_optimizers(config)
    assert custom_op.parameter_map["precision_mode"].s == b"force_fp32"
    assert config.graph_options.rewrite_options.memory_optimization == RewriterConfig.HEURISTICS
    assert config.graph_options.rewrite_options.remapping == RewriterConfig.OFF


def test_npu_config_proto_rejects_what_is_not_a_config_proto():
    with pytest.raises(TypeError, match="npu_config_proto expects a tf.compat.v1.ConfigProto or None, got dict"):
        npu_init.npu_config_proto({"precision_mode": "force_fp32"})


def test_npu_run_config_init_applies_to_the_run_configs_session_config():
    run_config = tf.estimator.RunConfig(session_config=tf.compat.v1.ConfigProto(allow_soft_placement=False))
    assert npu_init.npu_run_config_init(run_config=run_config) is run_config
    assert len(_npu_optimizers(run_config.session_config)) == 1
    assert run_config.session_config.allow_soft_placement
    fresh = npu_init.npu_run_config_init()
    assert isinstance(fresh, tf.estimator.RunConfig) and len(_npu_optimizers(fresh.session_config)) == 1
    npu_run_config = npu_init.npu_run_config_init(npu_init.NPURunConfig(precision_mode="force_fp16"))
    (custom_op,) = _npu_optimizers(npu_run_config.session_config)
    assert custom_op.parameter_map["precision_mode"].s == b"force_fp16"
    with pytest.raises(TypeError, match="tf.estimator.RunConfig"):
        npu_init.npu_run_config_init(tf.compat.v1.ConfigProto())


def test_init_resource_opens_an_npu_session_and_shutdown_closes_it(npu_config):
    config = npu_config(precision_mode="allow_mix_precision")
    with tf.Graph().as_default():
        sess, shutdown = npu_init.init_resource(config=config)
        assert isinstance(sess, tf.compat.v1.Session) and isinstance(shutdown, tf.Operation)
        assert sess._config is config and len(_npu_optimizers(config)) == 1  # mutated as npu_bridge does
        assert config.graph_options.rewrite_options.remapping == RewriterConfig.OFF
        assert (util.get_value("npu_rank_id"), util.get_value("npu_rank_size")) == (0, 1)
        npu_init.shutdown_resource(sess, shutdown)
        npu_init.close_session(sess)
        assert sess._closed


def test_set_keras_session_npu_config_sets_both_keras_backends(npu_config):
    from tensorflow.python.keras import backend as old_backend

    config = npu_config(precision_mode="allow_mix_precision")
    with tf.Graph().as_default():
        sess = npu_init.set_keras_session_npu_config(config=config)
        assert tf.compat.v1.keras.backend.get_session() is sess
        assert old_backend.get_session() is sess
        assert len(_npu_optimizers(sess._config)) == 1
        assert config.graph_options.rewrite_options.remapping == RewriterConfig.OFF
        sess.close()
    cleared = npu_init.npu_clear_session()
    assert tf.compat.v1.keras.backend.get_session() is cleared
    assert len(_npu_optimizers(cleared._config)) == 1
    cleared.close()
    tf.compat.v1.keras.backend.clear_session()


def test_npu_run_config_maps_each_argument_to_its_parameter_map_key(npu_config, tmp_path):
    session_config = npu_config(sim_report_dir=str(tmp_path))
    dump = npu_init.DumpConfig(enable_dump=True, dump_path=str(tmp_path), dump_step="0|2-4", dump_mode="all")
    config = npu_init.NPURunConfig(
        session_config=session_config, precision_mode="allow_mix_precision", mix_compile_mode=True,
        iterations_per_loop=1, enable_data_pre_proc=False, graph_memory_max_size=1024, op_debug_level=0,
        dump_config=dump, compress_weight_conf=str(tmp_path / "compress.cfg"), sim_fp16_execution="emulate")
    session = config.npu_session_config()
    (custom_op,) = _npu_optimizers(session)
    parameters = custom_op.parameter_map
    expected = {
        "precision_mode": b"allow_mix_precision", "mix_compile_mode": True, "iterations_per_loop": 1,
        "enable_data_pre_proc": False, "graph_memory_max_size": b"1024", "op_debug_level": 0,
        "enable_dump": True, "dump_path": str(tmp_path).encode(), "dump_step": b"0|2-4", "dump_mode": b"all",
        "sim_report_dir": str(tmp_path).encode(), "sim_fp16_execution": b"emulate",
    }
    for key, value in expected.items():
        assert getattr(parameters[key], KEYS[key].kind) == value, key
    for key in parameters:  # every key is written with the field the adapter reads
        assert parameters[key].WhichOneof("value") == KEYS[key].kind, key
    assert "precision_mode_v2" not in parameters and "aoe_mode" not in parameters  # None: not written
    assert "enable_compress_weight" not in parameters  # would make the real adapter abort with compress_weight_conf
    assert config.session_config is session_config and len(_npu_optimizers(session_config)) == 1
    options = from_config_proto(session)
    assert options["precision_mode"] == "allow_mix_precision" and options["mix_compile_mode"] is True
    assert session.graph_options.rewrite_options.remapping == RewriterConfig.OFF


def test_npu_run_config_rejects_mix_compile_with_iterations_per_loop():
    with pytest.raises(ValueError, match='^"iterations_per_loop" must be 1 with "mix_compile_mode" is True'):
        npu_init.NPURunConfig(mix_compile_mode=True, iterations_per_loop=2)
    assert npu_init.NPURunConfig(mix_compile_mode=False, iterations_per_loop=2).iterations_per_loop == 2


def test_npu_run_config_errors_match_the_session_route():
    with pytest.raises(ValueError) as from_session_route:
        from_dict({"precision_mode": "fp17"})
    with pytest.raises(ValueError) as from_run_config:
        npu_init.NPURunConfig(precision_mode="fp17")
    assert str(from_run_config.value) == str(from_session_route.value)
    message = str(from_run_config.value)
    assert "option precision_mode value 'fp17' is invalid, it should be one of: force_fp32" in message
    with pytest.raises(ValueError, match="precision_mode_v2"):
        npu_init.NPURunConfig(precision_mode="force_fp32", precision_mode_v2="fp16")
    with pytest.raises(ValueError, match="option graph_run_mode value 2 is invalid"):
        npu_init.NPURunConfig(graph_run_mode=2)


def test_npu_run_config_argument_type_errors_name_the_argument():
    with pytest.raises(TypeError, match="NPURunConfig argument iterations_per_loop must be an int, got str '2'"):
        npu_init.NPURunConfig(iterations_per_loop="2")
    with pytest.raises(TypeError, match="mix_compile_mode must be True or False"):
        npu_init.NPURunConfig(mix_compile_mode=1)
    with pytest.raises(ValueError, match="`dump_config` must be provided with type `DumpConfig`"):
        npu_init.NPURunConfig(dump_config={"enable_dump": True})
    with pytest.raises(TypeError, match="unexpected keyword argument 'precison_mode'; did you mean precision_mode"):
        npu_init.NPURunConfig(precison_mode="force_fp32")


def test_npu_estimator_requires_an_npu_run_config(tmp_path):
    def model_fn(features, labels, mode):
        raise AssertionError("not called")

    with pytest.raises(ValueError, match=r"NPUEstimator needs config=NPURunConfig\(...\), got a RunConfig"):
        npu_init.NPUEstimator(model_fn, config=tf.estimator.RunConfig())
    with pytest.raises(ValueError, match="got nothing"):
        npu_init.NPUEstimator(model_fn)
    with pytest.raises(ValueError, match="model_dir is set both"):
        npu_init.NPUEstimator(model_fn, model_dir=str(tmp_path / "a"),
                              config=npu_init.NPURunConfig(model_dir=str(tmp_path / "b")))


def test_npu_estimator_installs_the_npu_optimizer_and_runs_host_call(tmp_path):
    host_steps = []

    def model_fn(features, labels, mode):
        logits = tf.compat.v1.layers.dense(features, 1, name="dense")
        loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        host_call = (lambda value: tf.compat.v1.py_func(lambda v: host_steps.append(float(v)) or v, [value],
                                                        tf.float32), [loss])
        return npu_init.NPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=host_call)

    def input_fn():
        x = np.random.RandomState(0).rand(12, 3).astype(np.float32)
        return tf.compat.v1.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(4)

    config = npu_init.NPURunConfig(model_dir=str(tmp_path), precision_mode="force_fp32")
    estimator = npu_init.NPUEstimator(model_fn, config=config)
    (custom_op,) = _npu_optimizers(estimator.config.session_config)
    assert custom_op.parameter_map["precision_mode"].s == b"force_fp32"
    estimator.train(input_fn, steps=3)
    assert estimator.get_variable_value("global_step") == 3
    assert len(host_steps) == 3
    assert any(report.options["precision_mode"] == "force_fp32" for report in npu_sim_bridge.recent_reports())


def test_npu_scopes_tag_ops_with_bool_attrs():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        with npu_init.npu_scope.without_npu_compile_scope():
            host = tf.multiply(x, 2.0)
        with npu_init.npu_scope.keep_dtype_scope():
            kept = tf.add(host, 1.0)
        device = tf.abs(kept)
    assert host.op.node_def.attr["_without_npu_compile"].b is True
    assert "_without_npu_compile" not in kept.op.node_def.attr
    assert kept.op.node_def.attr["_keep_dtype"].WhichOneof("value") == "b" and kept.op.get_attr("_keep_dtype")
    assert not {"_without_npu_compile", "_keep_dtype"} & set(device.op.node_def.attr)


def test_importing_npu_init_does_not_give_every_session_the_npu_optimizer():
    assert not session_lib.npu_for_all_sessions_enabled()
    with tf.Graph().as_default():
        with tf.compat.v1.Session() as plain:
            assert plain._config is None or not _npu_optimizers(plain._config)


def test_enable_npu_for_all_sessions_is_an_explicit_opt_in(npu_config):
    given = npu_config(precision_mode="force_fp32")
    try:
        npu_init.enable_npu_for_all_sessions()
        with tf.Graph().as_default():
            with tf.compat.v1.Session() as sess:
                assert len(_npu_optimizers(sess._config)) == 1
            with tf.compat.v1.Session(config=given) as sess:
                (custom_op,) = _npu_optimizers(sess._config)
                assert custom_op.parameter_map["precision_mode"].s == b"force_fp32"
                assert sess._config.graph_options.rewrite_options.remapping == RewriterConfig.OFF
        assert given.graph_options.rewrite_options.remapping != RewriterConfig.OFF  # the caller's proto is untouched
    finally:
        npu_init.disable_npu_for_all_sessions()
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        assert sess._config is None or not _npu_optimizers(sess._config)   # undone
    try:
        assert session_lib.enable_from_environment({"NPU_SIM_ALL_SESSIONS": "1"}) is True
        assert session_lib.npu_for_all_sessions_enabled()
    finally:
        npu_init.disable_npu_for_all_sessions()
    assert session_lib.enable_from_environment({}) is False
    with pytest.raises(ValueError, match="NPU_SIM_ALL_SESSIONS='maybe' is invalid"):
        session_lib.enable_from_environment({"NPU_SIM_ALL_SESSIONS": "maybe"})


def test_enable_mixed_precision_reaches_the_helpers_sessions(npu_config):
    try:
        opt = npu_init.enable_mixed_precision(tf.compat.v1.train.GradientDescentOptimizer(0.1))
        assert isinstance(opt, npu_init.NPULossScaleOptimizer)
        (custom_op,) = _npu_optimizers(npu_init.npu_config_proto())
        assert custom_op.parameter_map["precision_mode"].s == b"allow_mix_precision"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (custom_op,) = _npu_optimizers(npu_init.npu_config_proto(npu_config(precision_mode="force_fp32")))
        assert custom_op.parameter_map["precision_mode"].s == b"force_fp32"
        assert any("sets precision_mode 'force_fp32', which is kept" in str(w.message) for w in caught)
    finally:
        npu_init.disable_mixed_precision()
    (custom_op,) = _npu_optimizers(npu_init.npu_config_proto())
    assert "precision_mode" not in custom_op.parameter_map


def test_enable_mixed_precision_wraps_each_optimizer_kind():
    try:
        keras_opt = npu_init.enable_mixed_precision(tf.keras.optimizers.legacy.SGD(0.1), loss_scale=128)
        assert isinstance(keras_opt, tf.keras.mixed_precision.LossScaleOptimizer) and not keras_opt.dynamic
        fixed = npu_init.enable_mixed_precision(tf.compat.v1.train.AdamOptimizer(), loss_scale=64)
        assert isinstance(fixed.loss_scale_manager, npu_init.FixedLossScaleManager)
        with pytest.raises(TypeError, match="use tf.keras.optimizers.legacy.SGD"):
            npu_init.enable_mixed_precision(tf.keras.optimizers.SGD(0.1))
        with pytest.raises(ValueError, match="loss_scale must be at least 1, got 0.5"):
            npu_init.enable_mixed_precision(tf.compat.v1.train.AdamOptimizer(), loss_scale=0.5)
        with pytest.raises(ValueError, match="'dynamic' or a number"):
            npu_init.enable_mixed_precision(tf.compat.v1.train.AdamOptimizer(), loss_scale="auto")
        with pytest.raises(TypeError, match="got str"):
            npu_init.enable_mixed_precision("sgd")
    finally:
        npu_init.disable_mixed_precision()


def test_enable_mixed_precision_warns_about_sessions_built_before_it():
    with tf.Graph().as_default():
        sess = npu_init.set_keras_session_npu_config()
        try:
            with pytest.warns(npu_sim_bridge.config.NpuSimConfigWarning, match="call enable_mixed_precision before set_keras"):
                npu_init.enable_mixed_precision(tf.keras.optimizers.legacy.SGD(0.1))
        finally:
            npu_init.disable_mixed_precision()
            sess.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no open helper session now: no warning
        npu_init.enable_mixed_precision(tf.keras.optimizers.legacy.SGD(0.1))
    npu_init.disable_mixed_precision()
    tf.compat.v1.keras.backend.clear_session()
