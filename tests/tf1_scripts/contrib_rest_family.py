"""The rest of the ModelZoo's tf.contrib: all_reduce, tensorrt, learn.Experiment / learn_runner / export strategies,
VocabularyProcessor, legacy_seq2seq.attention_decoder."""
import os
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.contrib.all_reduce.python import all_reduce
from tensorflow.contrib.learn.python.learn import learn_runner
from tensorflow.contrib.learn.python.learn.utils import saved_model_export_utils

# all_reduce: one tensor per device, every output the sum, on its own device
parts = []
for index in range(4):
    with tf.device(f"/cpu:0"):
        parts.append(tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) * (index + 1)))
ring = all_reduce.build_ring_all_reduce(parts, 1, 2, [0, 1, 2, 3], tf.add, un_op=lambda t: t / 4.0)
halving = tf.contrib.all_reduce.build_recursive_hd_all_reduce(parts, tf.add)
shuffle = all_reduce.build_shuffle_all_reduce(parts, ["/cpu:0"], tf.add_n)
with tf.Session() as sess:
    got = sess.run([ring, halving, shuffle])
total = np.arange(6, dtype=np.float32).reshape(2, 3) * 10
print("REST all_reduce", all(np.allclose(out, total / 4) for out in got[0]),
      all(np.allclose(out, total) for group in got[1:] for out in group), len(got[0]))

# tensorrt: the graph comes back as it was
graph_def = tf.get_default_graph().as_graph_def()
converted = tf.contrib.tensorrt.create_inference_graph(graph_def, ["Const"], precision_mode="FP16")
print("REST tensorrt unchanged", converted == graph_def)

# learn: an Experiment over an Estimator, run by learn_runner, exporting a SavedModel after each evaluation
features = np.random.RandomState(0).rand(32, 3).astype(np.float32)
labels = features @ np.array([[1.0], [-2.0], [0.5]], np.float32)


def model_fn(features, labels, mode):
    prediction = tf.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": prediction})
    loss = tf.losses.mean_squared_error(labels, prediction)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": features}, labels)).repeat().batch(8)


def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


model_dir = tempfile.mkdtemp()


class CountEvaluations(tf.train.SessionRunHook):
    count = 0

    def begin(self):
        CountEvaluations.count += 1


def experiment_fn(run_config, hparams):
    estimator = tf.estimator.Estimator(model_fn, config=run_config)
    strategy = saved_model_export_utils.make_export_strategy(serving_input_fn, exports_to_keep=1)
    return tf.contrib.learn.Experiment(estimator, input_fn, input_fn, train_steps=6, eval_steps=2,
                                       min_eval_frequency=3, export_strategies=[strategy],
                                       eval_hooks=[CountEvaluations()])


evaluation, exports = learn_runner.run(experiment_fn, run_config=tf.estimator.RunConfig(model_dir=model_dir),
                                       schedule="train_and_evaluate")
exported = sorted(os.listdir(os.path.join(model_dir, "export", "Servo")))
print("REST experiment step", evaluation["global_step"], "evaluations", CountEvaluations.count, "loss_finite",
      bool(np.isfinite(evaluation["loss"])), "exports_kept", len(exported),
      "saved_model", os.path.exists(os.path.join(tf.compat.as_str(exports[0]), "saved_model.pb")))

predictor = tf.contrib.predictor.from_saved_model(tf.compat.as_str(exports[0]))
predicted = predictor({"x": features[:2]})["y"]
with tf.Graph().as_default(), tf.Session() as sess:  # the same numbers from the checkpoint's own weights
    kernel = tf.train.load_variable(model_dir, "dense/kernel")
    bias = tf.train.load_variable(model_dir, "dense/bias")
print("REST predictor", predicted.shape, bool(np.allclose(predicted, features[:2] @ kernel + bias, atol=1e-5)))

# contrib.estimator: one SavedModel for training, evaluation and serving; SavedModelEstimator evaluates it
modes = {tf.estimator.ModeKeys.EVAL: tf.contrib.estimator.build_supervised_input_receiver_fn_from_input_fn(input_fn),
         tf.estimator.ModeKeys.PREDICT: serving_input_fn}
all_modes = tf.contrib.estimator.export_all_saved_models(tf.estimator.Estimator(model_fn, model_dir=model_dir),
                                                         tempfile.mkdtemp(), modes)
restored = tf.contrib.estimator.SavedModelEstimator(tf.compat.as_str(all_modes), model_dir=tempfile.mkdtemp())
restored_loss = restored.evaluate(input_fn, steps=2)["loss"]
from tensorflow.contrib.saved_model.python.saved_model import reader  # noqa: E402

tag_sets = sorted(sorted(tags) for tags in reader.get_saved_model_tag_sets(tf.compat.as_str(all_modes)))
print("REST saved_model_estimator", bool(np.isclose(restored_loss, evaluation["loss"], rtol=1e-4)), tag_sets)

processor = tf.contrib.learn.preprocessing.VocabularyProcessor(4)
ids = list(processor.fit_transform(["the cat sat", "the dog sat down here"]))
print("REST vocabulary", [row.tolist() for row in ids], list(processor.transform(["a cat"]))[0].tolist())

# legacy_seq2seq.attention_decoder: attention over encoder states, trained a few steps
with tf.Graph().as_default():
    tf.set_random_seed(2)
    states = tf.constant(np.random.RandomState(1).rand(2, 5, 4).astype(np.float32))
    steps = [tf.constant(np.random.RandomState(i).rand(2, 3).astype(np.float32)) for i in range(3)]
    cell = tf.nn.rnn_cell.GRUCell(6)
    outputs, state = tf.contrib.legacy_seq2seq.attention_decoder(steps, cell.zero_state(2, tf.float32), states, cell,
                                                                 output_size=2, num_heads=2)
    loss = tf.add_n([tf.reduce_mean(tf.square(out - 1.0)) for out in outputs])
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(20):
            sess.run(train)
        last = sess.run(loss)
    names = sorted(v.op.name for v in tf.trainable_variables())
print("REST attention", len(outputs), outputs[0].shape.as_list(), bool(last < first / 2))
print("REST attention_variables", " ".join(names))

# TF 1.15 internals and small contrib names
from tensorflow.python.framework import op_def_registry  # noqa: E402
from tensorflow.python.keras.engine import network  # noqa: E402
from tensorflow.python.ops import gradients_util  # noqa: E402
from tensorflow.contrib.util import loader  # noqa: E402
from tensorflow.contrib.tensorboard.plugins import projector  # noqa: E402

registered = op_def_registry.get_registered_ops()
with tf.Graph().as_default():
    trainable = [gradients_util._IsBackpropagatable(t) for t in (tf.constant(1.0), tf.constant(1), tf.constant(
        1.0, tf.bfloat16))]
    config = projector.ProjectorConfig()
    config.embeddings.add().tensor_name = "embedding"
    logdir = tempfile.mkdtemp()
    projector.visualize_embeddings(tf.summary.FileWriter(logdir), config)
print("REST internals", registered["MatMul"].name, len(registered) > 1000, trainable,
      issubclass(network.Network, tf.keras.Model),
      callable(loader.load_op_library), os.path.exists(os.path.join(logdir, "projector_config.pbtxt")),
      tf.contrib.eager.in_eager_mode())

# distributions.MultivariateNormalDiag: independent normals over the last axis
with tf.Graph().as_default():
    mvn = tf.contrib.distributions.MultivariateNormalDiag(loc=[0.0, 1.0], scale_diag=[1.0, 2.0])
    normal = tf.distributions.Normal(loc=[0.0, 1.0], scale=[1.0, 2.0])
    point = tf.constant([[0.5, -1.0], [2.0, 3.0]])
    drawn = mvn.sample(4000, seed=3)
    with tf.Session() as sess:
        values = sess.run({"ours": mvn.log_prob(point), "want": tf.reduce_sum(normal.log_prob(point), -1),
                           "entropy": mvn.entropy(), "want_entropy": tf.reduce_sum(normal.entropy()),
                           "std": tf.math.reduce_std(drawn, 0)})
print("REST mvn", bool(np.allclose(values["ours"], values["want"])),
      bool(np.isclose(values["entropy"], values["want_entropy"])), np.round(values["std"], 1).tolist())

# integrate.odeint: a harmonic oscillator (cos, -sin) and an exponential decay, with a gradient through the solver
with tf.Graph().as_default():
    times = np.linspace(0, 2, 5)
    orbit, info = tf.contrib.integrate.odeint(lambda y, t: tf.stack([y[1], -y[0]]), tf.constant([1.0, 0.0], tf.float64),
                                              times, rtol=1e-8, atol=1e-10, full_output=True)
    rate = tf.Variable(0.5, dtype=tf.float64)
    decay = tf.contrib.integrate.odeint(lambda y, t: -rate * y, tf.constant([2.0], tf.float64), times)
    slope = tf.gradients(decay[-1, 0], rate)[0]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run({"orbit": orbit, "decay": decay, "slope": slope, "evals": info["num_func_evals"]})
print("REST odeint", bool(np.allclose(got["orbit"], np.stack([np.cos(times), -np.sin(times)], 1), atol=1e-7)),
      bool(np.allclose(got["decay"][:, 0], 2 * np.exp(-0.5 * times), atol=1e-5)),
      bool(np.isclose(got["slope"], -4 * np.exp(-1.0), atol=1e-4)), got["evals"] > 0)
