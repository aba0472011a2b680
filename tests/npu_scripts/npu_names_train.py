"""A TF 1.15-era training script as ModelZoo writes them, using the newer npu_bridge names (run by npu-sim run).

DynamicRNN encoder, npu_unary_ops.gelu, Keras Dropout patched by npu_convert_dropout, LARS on the
gradients, NPUOptimizer with loss scaling, npu_plugin, an AI CPU op and an older NPURunConfig argument.
Prints `loss first=.. last=..`, `gelu op=.. list=.. dtype=.. placement=..`, `choice picked=..`,
`dropout call=..` (the module whose function Keras Dropout layers call).
"""
import numpy as np
import tensorflow as tf
from npu_bridge.npu_init import *
from npu_bridge.estimator import npu_ops
from npu_bridge.estimator.npu import npu_convert_dropout  # noqa: F401  (patches Keras Dropout)
from npu_bridge.estimator.npu import npu_plugin
from npu_bridge.estimator.npu.npu_config import NPURunConfig
from npu_bridge.estimator.npu.npu_dynamic_rnn import DynamicRNN
from npu_bridge.estimator.npu.npu_optimizer import NPUOptimizer
from npu_bridge.estimator.npu_unary_ops import npu_unary_ops
from npu_bridge.npu_cpu import npu_cpu_ops

import npu_sim_bridge

npu_plugin.set_device_sat_mode(1)
run_config = NPURunConfig(auto_tune_mode="RL,GA", save_checkpoints_steps=100)

tf.set_random_seed(1)
x = tf.placeholder(tf.float32, [16, 6, 5], name="x")
labels = tf.placeholder(tf.int32, [16], name="labels")
outputs, _, _, _, _, _, _, _ = DynamicRNN(16, tf.float32)(tf.transpose(x, [1, 0, 2]))
hidden = npu_unary_ops.gelu(tf.layers.dense(outputs[-1], 32, name="encoder"), name="encoder_gelu")
hidden = tf.keras.layers.Dropout(0.1)(hidden, training=True)
logits = tf.layers.dense(hidden, 2, name="logits")
loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

manager = ExponentialUpdateLossScaleManager(init_loss_scale=2 ** 10, incr_every_n_steps=100,
                                            decr_every_n_nan_or_inf=2, decr_ratio=0.5)
optimizer = NPUOptimizer(tf.train.AdamOptimizer(0.02), manager, is_loss_scale=True)
grads_and_vars = optimizer.compute_gradients(loss)
grads = npu_ops.LARS([v for _, v in grads_and_vars], [g for g, _ in grads_and_vars], weight_decay=1e-4)
train_op = optimizer.apply_gradients(list(zip(grads, [v for _, v in grads_and_vars])),
                                     global_step=tf.train.get_or_create_global_step())

grid = np.zeros([4, 4], bool)
grid[0, 1] = grid[2, 3] = True
choice, mask = npu_cpu_ops.randomchoicewithmask(tf.constant(grid), count=3)

config = tf.ConfigProto()
custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
custom_op.name = "NpuOptimizer"
custom_op.parameter_map["precision_mode"].s = tf.compat.as_bytes("allow_mix_precision")
config = npu_config_proto(config_proto=config)

rng = np.random.RandomState(0)
with tf.Session(config=config) as sess:
    sess.run(tf.global_variables_initializer())
    losses = []
    for _ in range(40):
        xv = rng.randn(16, 6, 5).astype(np.float32)
        feed = {x: xv, labels: (xv[:, :, 0].sum(axis=1) > 0).astype(np.int32)}
        losses.append(sess.run([loss, train_op], feed)[0])
    picked = sess.run(mask).sum()

decision = next(r for r in npu_sim_bridge.recent_reports() if "encoder_gelu" in r.nodes).node("encoder_gelu")
print(f"loss first={np.mean(losses[:5]):.4f} last={np.mean(losses[-5:]):.4f}")
print(f"gelu op={decision.op} list={decision.list} dtype={decision.dtype_after} placement={decision.placement}")
print(f"choice picked={picked}")
print(f"dropout call={tf.keras.layers.Dropout.call.__module__}.{tf.keras.layers.Dropout.call.__name__}")
