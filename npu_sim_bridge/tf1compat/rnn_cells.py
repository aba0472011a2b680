"""tf.contrib.rnn cells TensorFlow 2.15 lacks (LayerNormBasicLSTMCell, NASCell, OutputProjectionWrapper,
CudnnCompatibleGRUCell), with TensorFlow 1.15's variables."""

import tensorflow as tf

_V1 = tf.compat.v1


class LayerNormBasicLSTMCell(_V1.nn.rnn_cell.RNNCell):
    """LSTM with layer normalization of the four gates and the cell state (Ba et al. 2016), optional dropout on g.

    Variables (under the cell's scope, `layer_norm_basic_lstm_cell`): `kernel` [input + units, 4 units], `bias`
    only without layer_norm, and `gamma`/`beta` under `input`, `transform`, `forget`, `output`, `state`.
    The state is an LSTMStateTuple(c, h).
    """

    def __init__(self, num_units, forget_bias=1.0, input_size=None, activation=tf.tanh, layer_norm=True,
                 norm_gain=1.0, norm_shift=0.0, dropout_keep_prob=1.0, dropout_prob_seed=None, reuse=None):
        super().__init__(_reuse=reuse)
        if input_size is not None:
            raise ValueError("LayerNormBasicLSTMCell: input_size is not supported (TensorFlow 1.15 ignored it with a "
                             "warning); leave it out")
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._activation = activation
        self._layer_norm = layer_norm
        self._norm_gain = norm_gain
        self._norm_shift = norm_shift
        self._keep_prob = dropout_keep_prob
        self._seed = dropout_prob_seed

    @property
    def state_size(self):
        return _V1.nn.rnn_cell.LSTMStateTuple(self._num_units, self._num_units)

    @property
    def output_size(self):
        return self._num_units

    def _norm(self, inputs, scope):
        size = inputs.shape[-1:]
        with _V1.variable_scope(scope):
            gamma = _V1.get_variable("gamma", shape=size, dtype=inputs.dtype,
                                     initializer=_V1.constant_initializer(self._norm_gain))
            beta = _V1.get_variable("beta", shape=size, dtype=inputs.dtype,
                                    initializer=_V1.constant_initializer(self._norm_shift))
        mean, variance = tf.nn.moments(inputs, [1], keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)

    def call(self, inputs, state):  # pylint: disable=arguments-differ
        c, h = state
        args = tf.concat([inputs, h], 1)
        kernel = _V1.get_variable("kernel", [args.shape[-1], 4 * self._num_units], dtype=args.dtype)
        gates = tf.matmul(args, kernel)
        if not self._layer_norm:
            gates = tf.nn.bias_add(gates, _V1.get_variable("bias", [4 * self._num_units], dtype=args.dtype))
        i, j, f, o = tf.split(gates, 4, axis=1)
        if self._layer_norm:
            i, j = self._norm(i, "input"), self._norm(j, "transform")
            f, o = self._norm(f, "forget"), self._norm(o, "output")
        g = self._activation(j)
        if not isinstance(self._keep_prob, float) or self._keep_prob < 1:
            g = _V1.nn.dropout(g, keep_prob=self._keep_prob, seed=self._seed)
        new_c = c * tf.sigmoid(f + self._forget_bias) + tf.sigmoid(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state")
        new_h = self._activation(new_c) * tf.sigmoid(o)
        return new_h, _V1.nn.rnn_cell.LSTMStateTuple(new_c, new_h)


class NASCell(_V1.nn.rnn_cell.RNNCell):
    """The recurrent cell found by Neural Architecture Search (Zoph & Le 2017), with an optional projection.

    Variables (under the cell's scope, `nas_cell`): `recurrent_kernel` [output, 8 units], `kernel`
    [input, 8 units], `bias` [8 units] with use_bias, `projection_weights` [units, num_proj] with num_proj.
    The state is an LSTMStateTuple(c, m); the output is m. The same computation as tfa.rnn.NASCell.
    """

    _BRANCHES = 8

    def __init__(self, num_units, num_proj=None, use_bias=False, reuse=None, **kwargs):
        super().__init__(_reuse=reuse, **kwargs)
        self._num_units = num_units
        self._num_proj = num_proj
        self._use_bias = use_bias

    @property
    def state_size(self):
        return _V1.nn.rnn_cell.LSTMStateTuple(self._num_units, self._num_proj or self._num_units)

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def call(self, inputs, state):  # pylint: disable=arguments-differ
        c_prev, m_prev = state
        width = self._BRANCHES * self._num_units
        recurrent = _V1.get_variable("recurrent_kernel", [self.output_size, width], dtype=inputs.dtype)
        kernel = _V1.get_variable("kernel", [inputs.shape[-1], width], dtype=inputs.dtype)
        m_part = tf.matmul(m_prev, recurrent)
        if self._use_bias:
            m_part = tf.nn.bias_add(m_part, _V1.get_variable("bias", [width], dtype=inputs.dtype,
                                                             initializer=_V1.zeros_initializer()))
        x = tf.split(tf.matmul(inputs, kernel), self._BRANCHES, axis=1)
        m = tf.split(m_part, self._BRANCHES, axis=1)
        sigmoid, relu, tanh = tf.sigmoid, tf.nn.relu, tf.tanh
        first = [sigmoid(x[0] + m[0]), relu(x[1] + m[1]), sigmoid(x[2] + m[2]), relu(x[3] * m[3]),
                 tanh(x[4] + m[4]), sigmoid(x[5] + m[5]), tanh(x[6] + m[6]), sigmoid(x[7] + m[7])]
        second = [tanh(first[0] * first[1]), tanh(first[2] + first[3]), tanh(first[4] * first[5]),
                  sigmoid(first[6] + first[7])]
        new_c = tanh(second[0] + c_prev) * second[1]
        new_m = tanh(new_c * tanh(second[2] + second[3]))
        if self._num_proj is not None:
            new_m = tf.matmul(new_m, _V1.get_variable("projection_weights", [self._num_units, self._num_proj],
                                                      dtype=inputs.dtype))
        return new_m, _V1.nn.rnn_cell.LSTMStateTuple(new_c, new_m)


def LSTMBlockCell(num_units, forget_bias=1.0, cell_clip=None, use_peephole=False, dtype=None, reuse=None,  # noqa: N802
                  name="lstm_cell"):
    """tf.contrib.rnn.LSTMBlockCell: the same LSTM as tf.compat.v1.nn.rnn_cell.LSTMCell (same variable names, the
    `lstm_cell` scope), computed with TensorFlow's unfused ops instead of the LSTMBlockCell kernel."""
    return _V1.nn.rnn_cell.LSTMCell(num_units, use_peepholes=use_peephole, cell_clip=cell_clip,
                                    forget_bias=forget_bias, dtype=dtype, reuse=reuse, name=name)


def stack_bidirectional_dynamic_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None, initial_states_bw=None,
                                    dtype=None, sequence_length=None, parallel_iterations=None, time_major=False,
                                    scope=None, swap_memory=False):
    """Bidirectional layers stacked: each layer's forward and backward outputs, concatenated, feed the next.

    Returns (outputs, output_states_fw, output_states_bw); variables under
    stack_bidirectional_rnn/cell_<i>/bidirectional_rnn/{fw,bw}, as tf.contrib.rnn had them.
    """
    if not cells_fw or not cells_bw or len(cells_fw) != len(cells_bw):
        raise ValueError("stack_bidirectional_dynamic_rnn: cells_fw and cells_bw must be non-empty lists of the "
                         f"same length, got {len(cells_fw or [])} and {len(cells_bw or [])}")
    states_fw, states_bw = [], []
    layer_inputs = inputs
    with _V1.variable_scope(scope or "stack_bidirectional_rnn"):
        for index, (cell_fw, cell_bw) in enumerate(zip(cells_fw, cells_bw)):
            initial_fw = initial_states_fw[index] if initial_states_fw else None
            initial_bw = initial_states_bw[index] if initial_states_bw else None
            with _V1.variable_scope(f"cell_{index}"):
                (out_fw, out_bw), (state_fw, state_bw) = _V1.nn.bidirectional_dynamic_rnn(
                    cell_fw, cell_bw, layer_inputs, initial_state_fw=initial_fw, initial_state_bw=initial_bw,
                    sequence_length=sequence_length, parallel_iterations=parallel_iterations, dtype=dtype,
                    swap_memory=swap_memory, time_major=time_major)
                layer_inputs = tf.concat([out_fw, out_bw], 2)
            states_fw.append(state_fw)
            states_bw.append(state_bw)
    return layer_inputs, tuple(states_fw), tuple(states_bw)


class OutputProjectionWrapper(_V1.nn.rnn_cell.RNNCell):
    """`cell` followed by a dense projection of its output to output_size (then activation, when given).

    Variables: the projection's `kernel` and `bias` in the wrapper's scope (`output_projection_wrapper`),
    the cell's own inside it, as tf.contrib.rnn had them.
    """

    def __init__(self, cell, output_size, activation=None, reuse=None):
        super().__init__(_reuse=reuse)
        if output_size < 1:
            raise ValueError(f"OutputProjectionWrapper: output_size must be positive, got {output_size}")
        self._cell, self._output_size, self._activation = cell, output_size, activation

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._output_size

    def zero_state(self, batch_size, dtype):
        with tf.name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)

    def call(self, inputs, state):  # pylint: disable=arguments-differ
        output, new_state = self._cell(inputs, state)
        kernel = _V1.get_variable("kernel", [output.shape[-1], self._output_size], dtype=output.dtype)
        bias = _V1.get_variable("bias", [self._output_size], dtype=output.dtype, initializer=_V1.zeros_initializer())
        projected = tf.nn.bias_add(tf.matmul(output, kernel), bias)
        return (self._activation(projected) if self._activation else projected), new_state


class CudnnCompatibleGRUCell(_V1.nn.rnn_cell.RNNCell):
    """The GRU cuDNN computes, as a cell: the reset gate applied to the projected state,
    h' = (1 - u) * tanh(W_x x + b_x + r * (W_h h + b_h)) + u * h, with [r, u] = sigmoid(W_g [x, h] + b_g).

    Variables (scope `cudnn_compatible_gru_cell`): gates/kernel, gates/bias (1.0 by default),
    candidate/input_projection/{kernel,bias}, candidate/hidden_projection/{kernel,bias}.
    """

    def __init__(self, num_units, reuse=None, kernel_initializer=None):
        super().__init__(_reuse=reuse)
        self._num_units, self._kernel_initializer = num_units, kernel_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def _variable(self, name, shape, dtype, initializer=None):
        return _V1.get_variable(name, shape, dtype=dtype, initializer=initializer or self._kernel_initializer)

    def call(self, inputs, state):  # pylint: disable=arguments-differ
        units, dtype, depth = self._num_units, inputs.dtype, inputs.shape[-1]
        gate_kernel = self._variable("gates/kernel", [depth + units, 2 * units], dtype)
        gate_bias = self._variable("gates/bias", [2 * units], dtype, _V1.constant_initializer(1.0))
        input_kernel = self._variable("candidate/input_projection/kernel", [depth, units], dtype)
        hidden_kernel = self._variable("candidate/hidden_projection/kernel", [units, units], dtype)
        input_bias = self._variable("candidate/input_projection/bias", [units], dtype, _V1.zeros_initializer())
        hidden_bias = self._variable("candidate/hidden_projection/bias", [units], dtype, _V1.zeros_initializer())
        gates = tf.sigmoid(tf.nn.bias_add(tf.matmul(tf.concat([inputs, state], 1), gate_kernel), gate_bias))
        reset, update = tf.split(gates, 2, axis=1)
        candidate = tf.nn.bias_add(tf.matmul(inputs, input_kernel), input_bias)
        candidate += reset * tf.nn.bias_add(tf.matmul(state, hidden_kernel), hidden_bias)
        new_h = (1 - update) * tf.tanh(candidate) + update * state
        return new_h, new_h
