"""tf.contrib.cudnn_rnn, tf.contrib.recurrent and contrib.rnn's _Linear, on TensorFlow 2.15's unfused RNN ops."""

import tensorflow as tf

from npu_sim_bridge.tf1compat.rnn_cells import CudnnCompatibleGRUCell

_V1 = tf.compat.v1

# cudnn_rnn_ops constants of TensorFlow 1.15
CUDNN_RNN_UNIDIRECTION = "unidirectional"
CUDNN_RNN_BIDIRECTION = "bidirectional"
CUDNN_LSTM = "lstm"
CUDNN_GRU = "gru"
CUDNN_RNN_RELU = "rnn_relu"
CUDNN_RNN_TANH = "rnn_tanh"
CUDNN_INPUT_LINEAR_MODE = "linear_input"
CUDNN_INPUT_SKIP_MODE = "skip_input"
CUDNN_INPUT_AUTO_MODE = "auto_select"
CONSTANTS = {name: value for name, value in globals().items() if name.startswith("CUDNN_")}


class _Linear:
    """contrib.rnn's _Linear: `kernel` (and `bias`) in the current variable scope; call(args) = concat(args) W + b."""

    def __init__(self, args, output_size, build_bias, bias_initializer=None, kernel_initializer=None):
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        total = sum(int(arg.shape[-1]) for arg in args)
        dtype = args[0].dtype
        self._weights = _V1.get_variable("kernel", [total, output_size], dtype=dtype, initializer=kernel_initializer)
        self._biases = None
        if build_bias:
            self._biases = _V1.get_variable("bias", [output_size], dtype=dtype,
                                            initializer=bias_initializer or _V1.constant_initializer(0.0, dtype=dtype))

    def __call__(self, args):
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        result = tf.matmul(tf.concat(args, 1) if len(args) > 1 else args[0], self._weights)
        return tf.nn.bias_add(result, self._biases) if self._biases is not None else result


def CudnnCompatibleLSTMCell(num_units, reuse=None):  # noqa: N802
    """An LSTM cell with cuDNN's equations (no forget bias): LSTMCell(forget_bias=0) in scope
    `cudnn_compatible_lstm_cell`."""
    return _V1.nn.rnn_cell.LSTMCell(num_units, forget_bias=0.0, reuse=reuse, name="cudnn_compatible_lstm_cell")


class _CudnnRNN:
    """num_layers of LSTM or GRU cells, time-major by default, returning (outputs, states) as the cuDNN layers did."""

    _kind = CUDNN_LSTM

    def __init__(self, num_layers, num_units, input_mode=CUDNN_INPUT_LINEAR_MODE, direction=CUDNN_RNN_UNIDIRECTION,
                 dropout=0.0, seed=None, dtype=tf.float32, kernel_initializer=None, bias_initializer=None,
                 name=None):
        if direction not in (CUDNN_RNN_UNIDIRECTION, CUDNN_RNN_BIDIRECTION):
            raise ValueError(f"{type(self).__name__}: direction {direction!r} is invalid, it should be one of: "
                             f"{CUDNN_RNN_UNIDIRECTION}, {CUDNN_RNN_BIDIRECTION}")
        if input_mode != CUDNN_INPUT_LINEAR_MODE:
            raise ValueError(f"{type(self).__name__}: input_mode {input_mode!r} is not simulated; use "
                             f"{CUDNN_INPUT_LINEAR_MODE!r}")
        self.num_layers, self.num_units, self.direction = num_layers, num_units, direction
        self._dropout, self._seed, self._dtype = dropout, seed, dtype
        self._kernel_initializer = kernel_initializer
        self._name = name or ("cudnn_lstm" if self._kind == CUDNN_LSTM else "cudnn_gru")
        self._scope = None

    def _cell(self):
        if self._kind == CUDNN_LSTM:
            return _V1.nn.rnn_cell.LSTMCell(self.num_units, forget_bias=0.0, initializer=self._kernel_initializer)
        return _V1.nn.rnn_cell.GRUCell(self.num_units, kernel_initializer=self._kernel_initializer)

    def __call__(self, inputs, initial_state=None, sequence_lengths=None, time_major=True, training=True):
        directions = 2 if self.direction == CUDNN_RNN_BIDIRECTION else 1
        with _V1.variable_scope(self._scope or self._name, reuse=self._scope is not None) as scope:
            self._scope = scope
            layer_input, finals = inputs, []
            for layer in range(self.num_layers):
                with _V1.variable_scope(f"layer_{layer}"):
                    if training and self._dropout > 0 and layer > 0:
                        layer_input = _V1.nn.dropout(layer_input, rate=self._dropout, seed=self._seed)
                    initial = self._initial(initial_state, layer, directions)
                    if directions == 2:
                        outs, states = _V1.nn.bidirectional_dynamic_rnn(
                            self._cell(), self._cell(), layer_input, sequence_length=sequence_lengths,
                            initial_state_fw=initial[0], initial_state_bw=initial[1], dtype=self._dtype,
                            time_major=time_major)
                        layer_input = tf.concat(outs, -1)
                        finals.extend(states)
                    else:
                        layer_input, state = _V1.nn.dynamic_rnn(
                            self._cell(), layer_input, sequence_length=sequence_lengths, initial_state=initial[0],
                            dtype=self._dtype, time_major=time_major)
                        finals.append(state)
        if self._kind == CUDNN_LSTM:
            return layer_input, (tf.stack([s.h for s in finals]), tf.stack([s.c for s in finals]))
        return layer_input, (tf.stack(finals),)

    def _initial(self, initial_state, layer, directions):
        if initial_state is None:
            return [None] * directions
        rows = range(layer * directions, (layer + 1) * directions)
        if self._kind == CUDNN_LSTM:
            h, c = initial_state
            return [_V1.nn.rnn_cell.LSTMStateTuple(c[row], h[row]) for row in rows]
        return [initial_state[0][row] for row in rows]


class CudnnLSTM(_CudnnRNN):
    """tf.contrib.cudnn_rnn.CudnnLSTM: outputs, (h, c) with h, c of shape [num_layers * directions, batch, units]."""

    _kind = CUDNN_LSTM


class CudnnGRU(_CudnnRNN):
    """tf.contrib.cudnn_rnn.CudnnGRU: outputs, (h,) with h of shape [num_layers * directions, batch, units]."""

    _kind = CUDNN_GRU


def functional_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None, time_major=False,
                   scope=None, use_tpu=False, reverse=False):  # pylint: disable=unused-argument
    """tf.contrib.recurrent.functional_rnn as tf.compat.v1.nn.dynamic_rnn (reverse: over the reversed sequence)."""
    if reverse:
        axis = 0 if time_major else 1
        if sequence_length is None:
            inputs = tf.reverse(inputs, [axis])
        else:
            inputs = tf.reverse_sequence(inputs, sequence_length, seq_axis=axis, batch_axis=1 - axis)
    outputs, state = _V1.nn.dynamic_rnn(cell, inputs, sequence_length=sequence_length, initial_state=initial_state,
                                        dtype=dtype, time_major=time_major, scope=scope)
    if reverse:
        outputs = tf.reverse(outputs, [axis]) if sequence_length is None else tf.reverse_sequence(
            outputs, sequence_length, seq_axis=axis, batch_axis=1 - axis)
    return outputs, state


def bidirectional_functional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None, initial_state_bw=None, dtype=None,
                                 sequence_length=None, time_major=False, use_tpu=False, fast_reverse=False,
                                 scope=None):  # pylint: disable=unused-argument
    """tf.contrib.recurrent.bidirectional_functional_rnn as tf.compat.v1.nn.bidirectional_dynamic_rnn."""
    return _V1.nn.bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=sequence_length,
                                            initial_state_fw=initial_state_fw, initial_state_bw=initial_state_bw,
                                            dtype=dtype, time_major=time_major, scope=scope)


def cudnn_rnn_names():
    return {"CudnnLSTM": CudnnLSTM, "CudnnGRU": CudnnGRU, "CudnnCompatibleLSTMCell": CudnnCompatibleLSTMCell,
            "CudnnCompatibleGRUCell": CudnnCompatibleGRUCell, **CONSTANTS}


def recurrent_names():
    return {"functional_rnn": functional_rnn,
            "bidirectional_functional_rnn": bidirectional_functional_rnn}


def core_rnn_cell_names():
    return {"_Linear": _Linear}
