"""Data-parallel training as migrated ModelZoo scripts write it, on 2 simulated NPUs:

    npu-sim launch --nproc 2 examples/multirank_training.py

Each rank reads its shard of the data (by get_rank_id), NPUDistributedOptimizer averages the
gradients over the ranks, NPUBroadcastGlobalVariablesHook (from npu_hooks_append) starts every rank
from rank 0's initial values, and only rank 0 logs. Run with `npu-sim run` it is one rank on all data.
"""

import numpy as np
from npu_bridge.npu_init import *  # noqa: F401,F403

rank, size = get_rank_id(), get_rank_size()
features = np.random.RandomState(0).normal(size=(256, 4)).astype(np.float32)
labels = features @ np.array([[2.0], [-1.0], [0.5], [3.0]], np.float32)

dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shard(size, rank).batch(32 // size).repeat()
x, y = tf.data.make_one_shot_iterator(dataset).get_next()
weights = tf.get_variable("weights", [4, 1], initializer=tf.random_normal_initializer(seed=rank))
loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - y))
global_step = tf.train.get_or_create_global_step()
train_op = NPUDistributedOptimizer(tf.train.GradientDescentOptimizer(0.1)).minimize(loss, global_step=global_step)

with tf.train.MonitoredTrainingSession(hooks=npu_hooks_append(), config=npu_config_proto()) as sess:
    for _ in range(100):
        _, step, value = sess.run([train_op, global_step, loss])
        if rank == 0 and step % 25 == 0:
            print(f"step {step}: loss on rank 0's shard {value:.5f}")
    final = sess.run(weights).ravel()
print(f"rank {rank} of {size}: weights {np.round(final, 3)}")
