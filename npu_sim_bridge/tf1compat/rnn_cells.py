"""tf.contrib.rnn.LayerNormBasicLSTMCell: an LSTM cell with layer normalization, TensorFlow 1.15's variables."""

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
