"""tf.contrib.learn's Experiment, learn_runner, export strategies and VocabularyProcessor over tf.estimator.

An Experiment drives a tf.compat.v1.estimator.Estimator (NPUEstimator included): train, evaluate,
train_and_evaluate (evaluating every min_eval_frequency steps when given), continuous_train_and_eval,
exporting through its export strategies after evaluations. learn_runner.run builds one and runs the
schedule. The contrib Estimators themselves (tf.contrib.learn.Estimator) are not provided: their
eval_metrics argument is refused with what to use instead.
"""

import collections
import inspect
import os
import pickle
import re

import numpy as np
import tensorflow as tf

_V1 = tf.compat.v1


class ExportStrategy(collections.namedtuple("ExportStrategy", ["name", "export_fn", "strip_default_attrs"])):
    """A named way to export an estimator: export_fn(estimator, export_path, checkpoint_path[, eval_result])."""

    def __new__(cls, name, export_fn, strip_default_attrs=None):
        return super().__new__(cls, name, export_fn, strip_default_attrs)

    def export(self, estimator, export_path, checkpoint_path=None, eval_result=None):
        kwargs = {}
        parameters = inspect.signature(self.export_fn).parameters
        if "eval_result" in parameters:
            kwargs["eval_result"] = eval_result
        if "strip_default_attrs" in parameters:
            kwargs["strip_default_attrs"] = self.strip_default_attrs
        return self.export_fn(estimator, export_path, checkpoint_path, **kwargs)


def make_export_strategy(serving_input_fn, default_output_alternative_key=None, assets_extra=None, as_text=False,
                         exports_to_keep=5, strip_default_attrs=None):
    """An ExportStrategy writing a SavedModel (estimator.export_saved_model) under export_path/<timestamp>,
    keeping the newest exports_to_keep exports."""
    del default_output_alternative_key  # contrib Estimators' multi-head outputs; tf.estimator uses signatures

    def export_fn(estimator, export_dir_base, checkpoint_path=None):
        exported = estimator.export_saved_model(export_dir_base, serving_input_fn, assets_extra=assets_extra,
                                                as_text=as_text, checkpoint_path=checkpoint_path)
        if exports_to_keep is not None:
            versions = sorted(name for name in os.listdir(export_dir_base) if name.isdigit())
            for old in versions[:-exports_to_keep]:
                tf.io.gfile.rmtree(os.path.join(export_dir_base, old))
        return exported

    return ExportStrategy("Servo", export_fn, strip_default_attrs)


class Experiment:
    """tf.contrib.learn.Experiment over a tf.estimator Estimator (see the module docstring)."""

    def __init__(self, estimator, train_input_fn, eval_input_fn, eval_metrics=None, train_steps=None,
                 eval_steps=100, train_monitors=None, eval_hooks=None, local_eval_frequency=None,
                 eval_delay_secs=120, continuous_eval_throttle_secs=60, min_eval_frequency=None,
                 delay_workers_by_global_step=False, export_strategies=None, train_steps_per_iteration=None,
                 checkpoint_and_export=False, saving_listeners=None, check_interval_secs=5):
        del local_eval_frequency, eval_delay_secs, continuous_eval_throttle_secs, delay_workers_by_global_step
        del checkpoint_and_export, check_interval_secs  # timing of distributed workers: one process here
        if not isinstance(estimator, _V1.estimator.Estimator):
            raise TypeError(f"Experiment: estimator must be a tf.estimator.Estimator, got {type(estimator).__name__}")
        if eval_metrics is not None:
            raise ValueError("Experiment: eval_metrics must be None with tf.estimator.Estimator; return "
                             "eval_metric_ops in the EstimatorSpec of the model_fn instead")
        if train_steps_per_iteration is not None and train_steps_per_iteration <= 0:
            raise ValueError(f"Experiment: train_steps_per_iteration must be positive, got {train_steps_per_iteration}")
        self._estimator = estimator
        self._train_input_fn, self._eval_input_fn = train_input_fn, eval_input_fn
        self._train_steps, self._eval_steps = train_steps, eval_steps
        self._train_hooks = list(train_monitors or [])
        self._eval_hooks = list(eval_hooks or [])
        self._min_eval_frequency = min_eval_frequency
        self._steps_per_iteration = train_steps_per_iteration
        self._saving_listeners = saving_listeners
        if isinstance(export_strategies, ExportStrategy):
            export_strategies = [export_strategies]
        self._export_strategies = list(export_strategies or [])

    estimator = property(lambda self: self._estimator)
    train_steps = property(lambda self: self._train_steps)
    eval_steps = property(lambda self: self._eval_steps)

    def extend_train_hooks(self, additional_hooks):
        """Add hooks to those of training."""
        self._train_hooks.extend(additional_hooks)

    def reset_export_strategies(self, new_export_strategies=None):
        old, self._export_strategies = self._export_strategies, list(new_export_strategies or [])
        return old

    def _global_step(self):
        try:
            return int(self._estimator.get_variable_value(_V1.GraphKeys.GLOBAL_STEP))
        except ValueError:
            return 0  # no checkpoint yet

    def _train_to(self, max_steps):
        self._estimator.train(self._train_input_fn, max_steps=max_steps, hooks=self._train_hooks,
                              saving_listeners=self._saving_listeners)

    def train(self, delay_secs=None):
        """Train to train_steps (global step), or until the input ends when train_steps is None."""
        del delay_secs
        self._train_to(self._train_steps)
        return self._estimator

    def evaluate(self, delay_secs=None, name=None):
        """Evaluate eval_steps batches (the whole input when None) on the latest checkpoint."""
        del delay_secs
        return self._estimator.evaluate(self._eval_input_fn, steps=self._eval_steps, hooks=self._eval_hooks,
                                        name=name)

    def _export(self, eval_result):
        checkpoint = self._estimator.latest_checkpoint()
        return [strategy.export(self._estimator, os.path.join(self._estimator.model_dir, "export", strategy.name),
                                checkpoint, eval_result) for strategy in self._export_strategies]

    def _train_and_evaluate_every(self, every, predicate=None):
        eval_result, exports = None, []
        while True:
            step = self._global_step()
            if self._train_steps is not None and step >= self._train_steps:
                break
            target = step + every if self._train_steps is None else min(step + every, self._train_steps)
            self._train_to(target)
            if self._global_step() == step:
                break  # the input ended
            eval_result = self.evaluate()
            exports = self._export(eval_result)
            if predicate is not None and not predicate(eval_result):
                break
        return eval_result, exports

    def train_and_evaluate(self):
        """Train (evaluating every min_eval_frequency steps when it is set), then evaluate and export.
        Returns (the last evaluation's results, the export results)."""
        if self._min_eval_frequency:
            eval_result, exports = self._train_and_evaluate_every(self._min_eval_frequency)
            if eval_result is not None:
                return eval_result, exports
        self.train()
        eval_result = self.evaluate()
        return eval_result, self._export(eval_result)

    def continuous_train_and_eval(self, continuous_eval_predicate_fn=None):
        """Alternate train_steps_per_iteration steps of training with an evaluation and export, until
        train_steps or until continuous_eval_predicate_fn(eval results) is false."""
        every = self._steps_per_iteration or self._min_eval_frequency or 1000
        return self._train_and_evaluate_every(every, continuous_eval_predicate_fn)

    def local_run(self):
        return self.train_and_evaluate()

    def test(self):
        """One training step and one evaluation step: a smoke test of the input and model functions."""
        self._estimator.train(self._train_input_fn, steps=1, hooks=self._train_hooks)
        return self._estimator.evaluate(self._eval_input_fn, steps=1, hooks=self._eval_hooks, name="one_pass")


_SCHEDULES = ("train", "evaluate", "train_and_evaluate", "continuous_train_and_eval", "test", "local_run")


def run(experiment_fn, output_dir=None, schedule=None, run_config=None, hparams=None):
    """tf.contrib.learn.learn_runner.run: build the Experiment (experiment_fn(run_config, hparams), or
    experiment_fn(output_dir) in the older form) and call its `schedule` (train_and_evaluate by default)."""
    if run_config is not None and output_dir is not None:
        raise ValueError("learn_runner.run: pass run_config or output_dir, not both (output_dir is the older form; "
                         "put model_dir in the RunConfig)")
    experiment = experiment_fn(output_dir) if run_config is None else experiment_fn(run_config, hparams)
    if not isinstance(experiment, Experiment):
        raise TypeError(f"learn_runner.run: experiment_fn must return a tf.contrib.learn.Experiment, got "
                        f"{type(experiment).__name__}")
    schedule = schedule or "train_and_evaluate"
    if schedule not in _SCHEDULES:
        raise ValueError(f"learn_runner.run: schedule {schedule!r} is invalid, it should be one of: "
                         f"{', '.join(_SCHEDULES)}")
    return getattr(experiment, schedule)()


_TOKENS = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z][a-z]+(?=[A-Z])|[\'\w\-]+", re.UNICODE)


def tokenizer(iterator):
    """Split each text into words (the tokenizer VocabularyProcessor uses by default)."""
    for value in iterator:
        yield _TOKENS.findall(value)


class CategoricalVocabulary:
    """Word -> id, id 0 for unknown words; freeze() stops adding words."""

    def __init__(self, unknown_token="<UNK>"):
        self._unknown = unknown_token
        self._mapping = {unknown_token: 0}
        self._reverse = [unknown_token]
        self._frozen = False

    def __len__(self):
        return len(self._mapping)

    def freeze(self, freeze=True):
        self._frozen = freeze

    def get(self, category):
        if category not in self._mapping:
            if self._frozen:
                return 0
            self._mapping[category] = len(self._mapping)
            self._reverse.append(category)
        return self._mapping[category]

    def reverse(self, class_id):
        return self._reverse[class_id]


class VocabularyProcessor:
    """Maps texts to fixed-length id sequences: fit() builds the vocabulary (words seen min_frequency times or
    more), transform() yields int64 arrays of max_document_length ids (0 pads, and stands for unknown words)."""

    def __init__(self, max_document_length, min_frequency=0, vocabulary=None, tokenizer_fn=None):
        self.max_document_length = max_document_length
        self.min_frequency = min_frequency
        self.vocabulary_ = vocabulary or CategoricalVocabulary()
        self._tokenizer = tokenizer_fn or tokenizer

    def fit(self, raw_documents, unused_y=None):
        """Ids in order of first appearance; with min_frequency > 0, only words seen that often, most frequent
        first (ties by spelling)."""
        counts = collections.Counter()
        for tokens in self._tokenizer(raw_documents):
            counts.update(tokens)
        ordered = list(counts)
        if self.min_frequency > 0:
            ordered = [t for t in sorted(counts, key=lambda t: (-counts[t], t)) if counts[t] >= self.min_frequency]
        for token in ordered:
            self.vocabulary_.get(token)
        self.vocabulary_.freeze()
        return self

    def fit_transform(self, raw_documents, unused_y=None):
        documents = list(raw_documents)
        self.fit(documents)
        return self.transform(documents)

    def transform(self, raw_documents):
        for tokens in self._tokenizer(raw_documents):
            ids = np.zeros(self.max_document_length, np.int64)
            for position, token in enumerate(tokens[:self.max_document_length]):
                ids[position] = self.vocabulary_.get(token)
            yield ids

    def reverse(self, documents):
        for ids in documents:
            yield " ".join(self.vocabulary_.reverse(int(i)) for i in ids)

    def save(self, filename):
        with tf.io.gfile.GFile(filename, "wb") as handle:
            handle.write(pickle.dumps(self))

    @classmethod
    def restore(cls, filename):
        with tf.io.gfile.GFile(filename, "rb") as handle:
            return pickle.loads(handle.read())


def replace_monitors_with_hooks(monitors_or_hooks, estimator):
    """tf.contrib.learn.monitors.replace_monitors_with_hooks: session run hooks pass through; the contrib
    monitors (BaseMonitor) are not provided, so anything else is refused."""
    del estimator
    hooks = list(monitors_or_hooks or [])
    for hook in hooks:
        if not isinstance(hook, _V1.train.SessionRunHook):
            raise TypeError(f"replace_monitors_with_hooks: {hook!r} is not a tf.train.SessionRunHook; the "
                            "tf.contrib.learn monitors are not provided: use SessionRunHooks (tf.train.*Hook)")
    return hooks


def learn_names():
    """The names of tf.contrib.learn (submodules as dicts)."""
    from npu_sim_bridge.tf1compat import contrib_more

    export_utils = {"make_export_strategy": make_export_strategy}
    return {**contrib_more.learn_names(), "Experiment": Experiment, "ExportStrategy": ExportStrategy,
            "learn_runner": {"run": run}, "experiment": {"Experiment": Experiment},
            "preprocessing": {"VocabularyProcessor": VocabularyProcessor,
                              "CategoricalVocabulary": CategoricalVocabulary, "tokenizer": tokenizer},
            "utils": {"saved_model_export_utils": export_utils, **export_utils},
            "monitors": {"replace_monitors_with_hooks": replace_monitors_with_hooks}}
