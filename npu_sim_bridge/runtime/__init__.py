"""The drop-in runtime of Ascend's npu_bridge: session, Estimator and Keras helpers, scopes, loss scaling, the alias.

One module per concern; `npu_sim_bridge.npu_init` re-exports the names migrated scripts use.
Importing this package (or any of its modules) changes nothing global: only importing
`npu_sim_bridge.npu_init`, or an `npu_bridge` module through the alias, switches the process to
TF1 graph mode (see `graph_mode.py`).

  session.py      npu_config_proto, init_resource, ..., the opt-in NpuOptimizer-for-every-Session patch
  estimator.py    NPURunConfig, NPUEstimator, NPUEstimatorSpec, npu_run_config_init
  keras.py        set_keras_session_npu_config, npu_clear_session
  scopes.py       npu_scope: without_npu_compile_scope, keep_dtype_scope, ...
  loss_scale.py   NPULossScaleOptimizer, FixedLossScaleManager, ExponentialUpdateLossScaleManager
  mixed_precision.py  enable_mixed_precision
  distributed.py  hccl_ops / hccl.manage.api: collectives, groups, rank helpers, distributed optimizers
  hccl/           multi-rank runtime: rank table, each rank's TensorFlow server, collectives, optimizers
  hooks.py        npu_hooks_append, npu_callbacks_append and the hooks they add
  npu_ops.py      initialize_system, shutdown_system, dropout, LARS, fused Adam, basic_lstm_cell
  npu_unary_ops.py  gelu as the adapter's Gelu op;  npu_convert_dropout.py  Keras Dropout onto npu_ops.dropout
  npu_dynamic_rnn.py  DynamicRNN, DynamicGRUV2, DynamicAUGRU;  npu_optimizer.py  NPUOptimizer
  npu_strategy.py NPUStrategy;  npu_plugin.py  set_device_sat_mode, ...;  npu_cpu_ops.py  randomchoicewithmask,
                  embeddingrankid;  tf_adapter.py  npu_bridge.tf_adapter (GE data type numbers)
  npu_aicore_ops.py  fast_gelu, dropout_v3, ...;  tbe_vector_ops.py / tbe_cube_ops.py  LAMB steps, deformable_conv2d
  iteration_hooks.py  SetIterationsVarHook;  keras_to_npu.py  model_to_npu_estimator
  util.py         npu_bridge.estimator.npu.util
  dump_config.py  DumpConfig;  config_parts.py  ProfilingConfig, MemoryConfig, ... for NPURunConfig
  alias.py        the opt-in `npu_bridge` import alias (its MODULES table); npu-sim run is cli/run.py
  star_exports.py what a star import of each aliased module gives (its real names, never `tf`)
  graph_mode.py   TF1 graph mode, entered by npu_init and by the alias
TensorFlow 1.15's API for the script's own `import tensorflow` is the package npu_sim_bridge.tf1compat.
"""
