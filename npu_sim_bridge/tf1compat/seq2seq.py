"""tf.contrib.seq2seq's TF1 decoding API: Helpers, BasicDecoder(cell, helper, initial_state) and dynamic_decode.

TensorFlow Addons kept seq2seq for TensorFlow 2 with Samplers in place of Helpers and Keras-layer
decoders. A TF1 Helper here is a tensorflow_addons Sampler initialized at construction (TF1 Helpers took
their inputs there); BasicDecoder is a tfa.seq2seq.Decoder stepping a TF1 RNNCell; dynamic_decode runs
tfa's loop inside a TF1 variable scope ("decoder"), so variables keep TensorFlow 1.15's names. The
rest of tf.contrib.seq2seq (attention, beam search, losses) is tensorflow_addons.seq2seq as it is.
"""

import abc
import contextlib
import logging

import tensorflow as tf

from npu_sim_bridge.tf1compat import contrib_more

_V1 = tf.compat.v1


def _tfa():
    return contrib_more._addons("tensorflow_addons.seq2seq")  # pylint: disable=protected-access


class Helper(metaclass=abc.ABCMeta):
    """The TF1 interface of a decoding helper: what to feed the decoder at each step and when it is done."""

    @property
    @abc.abstractmethod
    def batch_size(self):
        """The batch size of the decoder's inputs (a Python int or a scalar tensor)."""

    @property
    @abc.abstractmethod
    def sample_ids_shape(self):
        """The shape of one example's sample ids (a TensorShape)."""

    @property
    @abc.abstractmethod
    def sample_ids_dtype(self):
        """The dtype of the sample ids."""

    @abc.abstractmethod
    def initialize(self, name=None):
        """(finished, first inputs) of the decoder."""

    @abc.abstractmethod
    def sample(self, time, outputs, state, name=None):
        """The sample ids of step `time` from the cell's outputs."""

    @abc.abstractmethod
    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        """(finished, next inputs, next state) after step `time`."""


class _SamplerHelper(Helper):
    """A TF1 Helper over a tensorflow_addons Sampler, initialized with the Helper's constructor arguments."""

    def __init__(self, sampler, *init_args, **init_kwargs):
        self._sampler = sampler
        self._start = sampler.initialize(*init_args, **init_kwargs)

    batch_size = property(lambda self: self._sampler.batch_size)
    sample_ids_shape = property(lambda self: self._sampler.sample_ids_shape)
    sample_ids_dtype = property(lambda self: self._sampler.sample_ids_dtype)

    def initialize(self, name=None):
        return self._start

    def sample(self, time, outputs, state, name=None):
        return self._sampler.sample(time, outputs, state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        return self._sampler.next_inputs(time, outputs, state, sample_ids)


def _embedding_fn(embedding):
    return embedding if callable(embedding) else (lambda ids: tf.nn.embedding_lookup(embedding, ids))


class TrainingHelper(_SamplerHelper):
    """Teacher forcing: step t reads inputs[:, t] (inputs[t] when time_major) until sequence_length."""

    def __init__(self, inputs, sequence_length, time_major=False, name=None):
        with tf.name_scope(name or "TrainingHelper"):
            super().__init__(_tfa().TrainingSampler(time_major=time_major), inputs, sequence_length=sequence_length)


class GreedyEmbeddingHelper(_SamplerHelper):
    """Greedy decoding: the argmax of each step's outputs, embedded, is the next input; stops at end_token."""

    def __init__(self, embedding, start_tokens, end_token):
        super().__init__(_tfa().GreedyEmbeddingSampler(_embedding_fn(embedding)), None, start_tokens=start_tokens,
                         end_token=end_token)


class SampleEmbeddingHelper(_SamplerHelper):
    """Sampling decoding: an id drawn from softmax(outputs / softmax_temperature), embedded, is the next input."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(_tfa().SampleEmbeddingSampler(_embedding_fn(embedding), softmax_temperature, seed), None,
                         start_tokens=start_tokens, end_token=end_token)


class ScheduledEmbeddingTrainingHelper(_SamplerHelper):
    """Teacher forcing where, with sampling_probability, the embedded sampled id replaces the next input."""

    def __init__(self, inputs, sequence_length, embedding, sampling_probability, time_major=False, seed=None,
                 scheduling_seed=None, name=None):
        with tf.name_scope(name or "ScheduledEmbeddingSamplingWrapper"):
            sampler = _tfa().ScheduledEmbeddingTrainingSampler(sampling_probability, _embedding_fn(embedding),
                                                               time_major, seed, scheduling_seed)
            super().__init__(sampler, inputs, sequence_length=sequence_length)


class InferenceHelper(_SamplerHelper):
    """Decoding where sample_fn(outputs) gives the sample and next_inputs_fn(sample) the next input."""

    def __init__(self, sample_fn, sample_shape, sample_dtype, start_inputs, end_fn, next_inputs_fn=None):
        super().__init__(_tfa().InferenceSampler(sample_fn, sample_shape, sample_dtype, end_fn, next_inputs_fn),
                         start_inputs)


class CustomHelper(Helper):
    """A Helper from three functions: initialize_fn(), sample_fn(time, outputs, state) and
    next_inputs_fn(time, outputs, state, sample_ids)."""

    def __init__(self, initialize_fn, sample_fn, next_inputs_fn, sample_ids_shape=None, sample_ids_dtype=None):
        self._initialize_fn, self._sample_fn, self._next_inputs_fn = initialize_fn, sample_fn, next_inputs_fn
        self._batch_size = None
        self._sample_ids_shape = tf.TensorShape(sample_ids_shape or [])
        self._sample_ids_dtype = sample_ids_dtype or tf.int32

    @property
    def batch_size(self):
        if self._batch_size is None:
            raise ValueError("CustomHelper: batch_size is known once initialize() has run")
        return self._batch_size

    sample_ids_shape = property(lambda self: self._sample_ids_shape)
    sample_ids_dtype = property(lambda self: self._sample_ids_dtype)

    def initialize(self, name=None):
        finished, inputs = self._initialize_fn()
        if self._batch_size is None:
            self._batch_size = tf.size(finished)
        return finished, inputs

    def sample(self, time, outputs, state, name=None):
        return self._sample_fn(time=time, outputs=outputs, state=state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        return self._next_inputs_fn(time=time, outputs=outputs, state=state, sample_ids=sample_ids)


def _basic_decoder_class():
    """BasicDecoder, a subclass of tfa.seq2seq.Decoder (defined on first use: tensorflow_addons loads on demand)."""
    tfa = _tfa()

    class BasicDecoder(tfa.Decoder):
        """TF1's BasicDecoder(cell, helper, initial_state, output_layer=None): each step runs the cell, the output
        layer, then the helper's sample and next_inputs. Outputs are BasicDecoderOutput(rnn_output, sample_id)."""

        def __init__(self, cell, helper, initial_state, output_layer=None):
            if not isinstance(helper, Helper):
                raise TypeError(f"BasicDecoder: helper must be a tf.contrib.seq2seq Helper (TrainingHelper, "
                                f"GreedyEmbeddingHelper, ...), got {type(helper).__name__}; a tensorflow_addons "
                                "Sampler goes to tfa.seq2seq.BasicDecoder instead")
            self._cell, self._helper, self._initial_state = cell, helper, initial_state
            self._output_layer = output_layer

        batch_size = property(lambda self: self._helper.batch_size)

        def _rnn_output_size(self):
            size = tf.TensorShape(self._cell.output_size)
            if self._output_layer is None:
                return size
            shape = self._output_layer.compute_output_shape(tf.TensorShape([None]).concatenate(size))
            return shape[1:]

        @property
        def output_size(self):
            return tfa.BasicDecoderOutput(rnn_output=self._rnn_output_size(),
                                          sample_id=self._helper.sample_ids_shape)

        @property
        def output_dtype(self):
            dtype = tf.nest.flatten(self._initial_state)[0].dtype
            return tfa.BasicDecoderOutput(tf.nest.map_structure(lambda _: dtype, self._rnn_output_size()),
                                          self._helper.sample_ids_dtype)

        def initialize(self, name=None):
            finished, first_inputs = self._helper.initialize()
            return finished, first_inputs, self._initial_state

        def step(self, time, inputs, state, training=None, name=None):
            with tf.name_scope(name or "BasicDecoderStep"):
                outputs, cell_state = self._cell(inputs, state)
                if self._output_layer is not None:
                    outputs = self._output_layer(outputs)
                sample_ids = self._helper.sample(time=time, outputs=outputs, state=cell_state)
                finished, next_inputs, next_state = self._helper.next_inputs(
                    time=time, outputs=outputs, state=cell_state, sample_ids=sample_ids)
            return tfa.BasicDecoderOutput(outputs, sample_ids), next_state, next_inputs, finished

    return BasicDecoder


class _UnusedAssertFilter(logging.Filter):
    """Drops TensorFlow's "Object was never used" report for the maximum_iterations check tensorflow_addons adds
    (an Assert nothing runs in a TF1 graph; TensorFlow 1.15's dynamic_decode had no such check)."""

    def filter(self, record):
        message = record.getMessage()
        return not ("Object was never used" in message and "assert_greater" in message)


@contextlib.contextmanager
def _quiet_unused_assert():
    logger, quiet = tf.get_logger(), _UnusedAssertFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _attention_wrapper_class():
    """AttentionWrapper, tensorflow_addons' with TF1's zero_state(batch_size, dtype) (defined on first use)."""
    tfa = _tfa()

    class AttentionWrapper(tfa.AttentionWrapper):
        """tensorflow_addons' AttentionWrapper with TF1's zero_state(batch_size, dtype): an AttentionWrapperState
        whose cell_state scripts replace with .clone(cell_state=encoder_state)."""

        def zero_state(self, batch_size, dtype):
            return self.get_initial_state(batch_size=batch_size, dtype=dtype)

    return AttentionWrapper


def dynamic_decode(decoder, output_time_major=False, impute_finished=False, maximum_iterations=None,
                   parallel_iterations=32, swap_memory=False, scope=None, **kwargs):
    """TF1's dynamic_decode: (final_outputs, final_state, final_sequence_lengths), variables under `scope`
    ("decoder" by default) as TensorFlow 1.15 named them; tensorflow_addons' decoding loop."""
    with _V1.variable_scope(scope, "decoder") as varscope:
        if varscope.caching_device is None and not tf.executing_eagerly():
            varscope.set_caching_device(lambda op: op.device)
        with _quiet_unused_assert():
            return _tfa().dynamic_decode(decoder, output_time_major=output_time_major, impute_finished=impute_finished,
                                         maximum_iterations=maximum_iterations,
                                         parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                                         scope=varscope.original_name_scope, **kwargs)


_names = None


def seq2seq_names():
    """The TF1 names of tf.contrib.seq2seq (the rest comes from tensorflow_addons.seq2seq)."""
    global _names
    if _names is None:
        _names = {"Helper": Helper, "TrainingHelper": TrainingHelper, "GreedyEmbeddingHelper": GreedyEmbeddingHelper,
                  "SampleEmbeddingHelper": SampleEmbeddingHelper, "CustomHelper": CustomHelper,
                  "ScheduledEmbeddingTrainingHelper": ScheduledEmbeddingTrainingHelper,
                  "InferenceHelper": InferenceHelper, "BasicDecoder": _basic_decoder_class(),
                  "dynamic_decode": dynamic_decode, "BasicDecoderOutput": _tfa().BasicDecoderOutput,
                  "AttentionWrapper": _attention_wrapper_class()}
    return dict(_names)


TF1_NAMES = ("Helper", "TrainingHelper", "GreedyEmbeddingHelper", "SampleEmbeddingHelper", "CustomHelper",
             "ScheduledEmbeddingTrainingHelper", "InferenceHelper", "BasicDecoder", "dynamic_decode",
             "BasicDecoderOutput")  # AttentionWrapper is tensorflow_addons' with zero_state: a difference

# The deep module paths of tf.contrib.seq2seq.python.ops (each holds the same names here).
DEEP_PATHS = tuple(f"seq2seq.python.ops.{name}" for name in (
    "helper", "basic_decoder", "decoder", "attention_wrapper", "beam_search_decoder", "beam_search_ops", "loss"))
