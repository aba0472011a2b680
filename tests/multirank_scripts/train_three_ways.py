"""Data-parallel training written for npu_bridge: a Session, an Estimator and a Keras model, 5 steps each.

Run with `npu-sim launch --nproc 2 train_three_ways.py OUT` (each rank trains on its half of a fixed
batch, from its own random initial values, broadcast from rank 0) or `npu-sim run
train_three_ways.py OUT` (one rank, the whole batch). Each rank writes OUT/rank<R>.json: the
variables after the broadcast and after training, per API, plus hccl_ops results and a distributed
loss-scaling run where rank 1 overflows at step 1.
"""

import json
import os
import sys

import numpy as np
from npu_bridge.npu_init import *  # noqa: F401,F403
from npu_bridge.hccl import hccl_ops

OUT = sys.argv[1]
RANK, SIZE = get_rank_id(), get_rank_size()
STEPS, LR = 5, 0.1
FEATURES = np.random.RandomState(0).uniform(-1, 1, (8, 3)).astype(np.float32)
LABELS = (FEATURES @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
HALF = len(FEATURES) // SIZE
X, Y = FEATURES[RANK * HALF:(RANK + 1) * HALF], LABELS[RANK * HALF:(RANK + 1) * HALF]
SEED = 100 + RANK  # every rank starts elsewhere; the broadcast makes them start from rank 0's values
results = {"rank": RANK, "size": SIZE}


def linear_model(features):
    init = tf.random_normal_initializer(seed=SEED)
    weights = tf.get_variable("weights", [3, 1], initializer=init)
    bias = tf.get_variable("bias", [1], initializer=init)
    return tf.matmul(features, weights) + bias


def as_lists(values):
    return {name: np.asarray(value).tolist() for name, value in values.items()}


def session_part():
    with tf.Graph().as_default():
        x, y = tf.constant(X), tf.constant(Y)
        loss = tf.reduce_mean(tf.square(linear_model(x) - y))
        opt = NPUDistributedOptimizer(tf.train.GradientDescentOptimizer(LR))
        train_op = opt.minimize(loss)
        variables = {v.op.name: v for v in tf.global_variables()}
        broadcast = [tf.assign(v, hccl_ops.broadcast([v], 0)[0]) for v in tf.global_variables()] if SIZE > 1 else []
        with tf.Session(config=npu_config_proto()) as sess:
            sess.run(tf.global_variables_initializer())
            results["session_initial"] = as_lists(sess.run(variables))
            sess.run(broadcast)
            results["session_broadcast"] = as_lists(sess.run(variables))
            for _ in range(STEPS):
                sess.run(train_op)
            results["session_final"] = as_lists(sess.run(variables))


class RecordVariables(tf.train.SessionRunHook):
    """Reads the variables once the Session exists (after the broadcast hook before it)."""

    def after_create_session(self, session, coord):
        results["estimator_broadcast"] = as_lists(
            session.run({v.op.name: v for v in tf.trainable_variables()}))


def estimator_part():
    def model_fn(features, labels, mode):
        loss = tf.reduce_mean(tf.square(linear_model(features) - labels))
        opt = NPUDistributedOptimizer(tf.train.GradientDescentOptimizer(LR))
        train_op = opt.minimize(loss, global_step=tf.train.get_or_create_global_step())
        return NPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        return tf.data.Dataset.from_tensors((X, Y)).repeat()

    config = NPURunConfig(model_dir=os.path.join(OUT, f"estimator_rank{RANK}"), save_summary_steps=0,
                          log_step_count_steps=None)
    estimator = NPUEstimator(model_fn=model_fn, config=config)
    estimator.train(input_fn, steps=STEPS, hooks=[NPUBroadcastGlobalVariablesHook(0), RecordVariables()])
    results["estimator_final"] = {name: estimator.get_variable_value(name).tolist() for name in ("weights", "bias")}


class RecordWeights(tf.keras.callbacks.Callback):
    def on_batch_begin(self, batch, logs=None):
        if "keras_broadcast" not in results:
            results["keras_broadcast"] = [w.tolist() for w in self.model.get_weights()]


def keras_part():
    with tf.Graph().as_default():
        set_keras_session_npu_config()
        init = tf.keras.initializers.RandomNormal(seed=SEED)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,), kernel_initializer=init,
                                                           bias_initializer=init)])
        model.compile(optimizer=npu_keras_optimizer(tf.keras.optimizers.SGD(LR)), loss="mse")
        model.fit(X, Y, batch_size=len(X), epochs=STEPS, shuffle=False, verbose=0,
                  callbacks=[NPUBroadcastGlobalVariablesCallback(0), RecordWeights()])
        results["keras_final"] = [w.tolist() for w in model.get_weights()]


def loss_scale_part():
    """Rank 1's batch overflows at step 1: with is_distributed=True every rank skips that step."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        weights = tf.get_variable("w", initializer=tf.ones([3, 1]))
        loss = tf.reduce_mean(tf.matmul(x, weights))
        opt = NPULossScaleOptimizer(tf.train.GradientDescentOptimizer(LR), FixedLossScaleManager(1),
                                    is_distributed=True)
        train_op = opt.minimize(loss)
        steps = []
        with tf.Session(config=npu_config_proto()) as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(4):
                batch = np.full_like(X, np.inf) if (step == 1 and RANK == SIZE - 1) else X
                _, finite = sess.run([train_op, opt.is_overall_finite], {x: batch})
                steps.append({"finite": bool(finite), "w": sess.run(weights).tolist()})
        results["loss_scale_steps"] = steps


LARGE = 6_000_001


def collectives_part():
    with tf.Graph().as_default():
        mine = tf.constant([1.0, 2.0]) * (RANK + 1)
        fetches = {"sum": hccl_ops.allreduce(mine, "sum"), "prod": hccl_ops.allreduce(mine, "prod"),
                   "max": hccl_ops.allreduce(mine, "max"), "min": hccl_ops.allreduce(mine, "min"),
                   "allgather": hccl_ops.allgather(tf.reshape(mine, [1, 2]), SIZE),
                   "broadcast": hccl_ops.broadcast([mine], SIZE - 1)[0],
                   "reduce_scatter": hccl_ops.reduce_scatter(tf.tile(mine, [SIZE]), "sum", SIZE),
                   "npu_allreduce": npu_allreduce(mine),
                   # d/d mine of sum(allreduce(mine * mine)) = 2 * mine on each rank (the gradient all-reduce)
                   "gradient": tf.gradients(tf.reduce_sum(hccl_ops.allreduce(mine * mine, "sum")), mine)[0]}
        table = tf.get_variable("table", initializer=tf.zeros([SIZE, 2]))
        sparse = tf.gradients(tf.reduce_sum(tf.gather(table, [RANK])), table)[0]  # IndexedSlices: row RANK
        fetches["sparse_mean"] = tf.convert_to_tensor(npu_allreduce(sparse))  # all-gathered, / SIZE
        create_group("everyone", SIZE, list(range(SIZE)))
        create_group("myself", 1, [RANK])
        fetches["group_sum"] = hccl_ops.allreduce(mine, "sum", group="everyone")
        fetches["own_group_sum"] = hccl_ops.allreduce(mine, "sum", group="myself")
        # 24 MB (an odd count): the ring cuts each rank's share into several pieces; every element must add up.
        pattern = tf.cast(tf.range(LARGE) % 1000, tf.float32)
        large = hccl_ops.allreduce(pattern * (RANK + 1), "sum")
        fetches["large_sum_mismatches"] = tf.math.count_nonzero(
            tf.not_equal(large, pattern * (SIZE * (SIZE + 1) // 2)))
        fetches["large_sum_size"] = tf.size(large)
        if SIZE > 1:
            if RANK == 0:
                fetches["send"] = hccl_ops.send(mine * 10, 7, 1)
            elif RANK == 1:
                fetches["receive"] = hccl_ops.receive([2], tf.float32, 7, 0)
        with tf.Session(config=npu_config_proto()) as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run(fetches)
        values.pop("send", None)
        results["collectives"] = {name: np.asarray(value).tolist() for name, value in values.items()}


session_part()
estimator_part()
keras_part()
loss_scale_part()
collectives_part()
with open(os.path.join(OUT, f"rank{RANK}.json"), "w", encoding="utf-8") as handle:
    json.dump(results, handle)
print(f"rank {RANK} of {SIZE} done")
