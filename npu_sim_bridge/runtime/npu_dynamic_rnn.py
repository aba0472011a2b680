"""npu_bridge.estimator.npu.npu_dynamic_rnn: the fused DynamicRNN (LSTM), DynamicGRUV2 and DynamicAUGRU layers.

The adapter's layers call one fused NPU op per sequence; here each runs the same recurrence with
TensorFlow ops (a tf.scan over time), so the layer, its variables (same names and shapes:
`dynamicrnn/w` [input+hidden, 4*hidden], `dynamicgruv2/weight_input` [input, 3*hidden], ...) and its
outputs are what a script gets on the NPU, and gradients come from TensorFlow. Inputs are time-major
[time, batch, input] unless time_major=False. Outputs, each [time, batch, hidden]:

  DynamicRNN    (y, output_h, output_c, i, j, f, o, tanhc)   gates in TF's i, j, f, o order
  DynamicGRUV2  (y, output_h, update, reset, new, hidden_new)  gate_order "zrh" or "rzh"
  DynamicAUGRU  (y, output_h, update, update_att, reset, new, hidden_new), call(x, weight_att [time, batch])

LSTM: c' = sigmoid(f + forget_bias) * c + sigmoid(i) * act(j), h' = sigmoid(o) * act(c'), as
tf.nn.rnn_cell.BasicLSTMCell with the same kernel and bias. GRU: h' = z * h + (1 - z) * n, with
n = act(x W_n + b_n + r * (h U_n + c_n)) (reset_after=True, as Keras's GRUCell(reset_after=True))
or n = act(x W_n + b_n + (r * h) U_n + c_n). AUGRU scales the update gate by the attention score:
z' = (1 - att) * z. With seq_length, steps at or after a sequence's length give y = 0 and carry the
state unchanged (as tf.nn.dynamic_rnn does). Options the NPU op does not support either
(BIDIRECTIONAL, cell_depth > 1, num_proj, keep_prob < 1, use_peephole) raise a ValueError naming them.
"""

import math

import tensorflow as tf
from keras.src import backend as keras_backend

DYNAMIC_RNN_UNIDIRECTION = "UNIDIRECTIONAL"
DYNAMIC_RNN_BIDIRECTION = "BIDIRECTIONAL"

_ACTIVATIONS = {"tanh": tf.tanh, "relu": tf.nn.relu, "sigmoid": tf.sigmoid}


def _dim(shape, index):
    return tf.compat.dimension_value(tf.TensorShape(shape)[index])


class _DynamicBasic(tf.compat.v1.layers.Layer):
    """What the three layers share: options, their checks, time-major handling and sequence masks."""

    _BASE_NAME = "dynamic_basic"  # TensorFlow 1.15's snake case of the class name: the variable scope

    def __init__(self, hidden_size, dtype, direction=DYNAMIC_RNN_UNIDIRECTION, cell_depth=1, keep_prob=1.0,
                 cell_clip=-1.0, num_proj=0, time_major=True, activation="tanh", is_training=True, name=None):
        super().__init__(name=name, dtype=dtype)
        kind = type(self).__name__
        if direction not in (DYNAMIC_RNN_UNIDIRECTION, DYNAMIC_RNN_BIDIRECTION):
            raise ValueError(f"{kind}: invalid direction {direction!r}, expecting {DYNAMIC_RNN_UNIDIRECTION!r} "
                             f"or {DYNAMIC_RNN_BIDIRECTION!r}")
        unsupported = [(direction != DYNAMIC_RNN_UNIDIRECTION, f"direction={direction!r}"),
                       (cell_depth != 1, f"cell_depth={cell_depth}"), (num_proj != 0, f"num_proj={num_proj}"),
                       (keep_prob != 1.0, f"keep_prob={keep_prob}")]
        for bad, what in unsupported:
            if bad:
                raise ValueError(f"{kind}: {what} is not supported by the NPU's fused op nor by the simulation; "
                                 "use the defaults (UNIDIRECTIONAL, cell_depth=1, num_proj=0, keep_prob=1.0), or "
                                 "tf.nn.bidirectional_dynamic_rnn / dropout around the layer")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{kind}: activation {activation!r} is not one of {', '.join(_ACTIVATIONS)}")
        self._hidden_size = int(hidden_size)
        self._rnn_dtype = tf.as_dtype(dtype)
        self._direction, self._cell_depth, self._keep_prob = direction, cell_depth, keep_prob
        self._cell_clip, self._num_proj, self._time_major = cell_clip, num_proj, time_major
        self._activation, self._is_training = activation, is_training
        self._act = _ACTIVATIONS[activation]

    def _make_unique_name(self, name_uid_map=None, avoid_names=None, namespace="", zero_based=False):
        name = keras_backend.unique_object_name(self._BASE_NAME, name_uid_map=name_uid_map, avoid_names=avoid_names,
                                                namespace=namespace, zero_based=zero_based)
        return name, self._BASE_NAME

    direction = property(lambda self: self._direction)
    cell_depth = property(lambda self: self._cell_depth)
    keep_prob = property(lambda self: self._keep_prob)
    cell_clip = property(lambda self: self._cell_clip)
    num_proj = property(lambda self: self._num_proj)
    time_major = property(lambda self: self._time_major)
    activation = property(lambda self: self._activation)
    is_training = property(lambda self: self._is_training)

    def _input_size(self, input_shape):
        size = _dim(input_shape, 2)
        if size is None:
            raise ValueError(f"{type(self).__name__}: the input's last dimension (input size) must be known, "
                             f"got shape {tf.TensorShape(input_shape)}")
        return size

    def _uniform(self, name, shape):
        stdv = 1.0 / math.sqrt(self._hidden_size)
        return self.add_weight(name, shape=shape, dtype=self._rnn_dtype,
                               initializer=tf.compat.v1.random_uniform_initializer(-stdv, stdv))

    def _run(self, x, seq_length, init_state, step, gates, extra=None):
        """Scan `step(state, x_t, extra_t) -> ((h, *gates), new state)` over time; masks by seq_length."""
        x = tf.convert_to_tensor(x, dtype=self._rnn_dtype)
        if not self._time_major:
            x = tf.transpose(x, [1, 0, 2])
            if extra is not None:
                extra = tf.transpose(extra, [1, 0])
        steps = tf.shape(x)[0]
        if seq_length is None:
            mask = tf.ones(tf.shape(x)[:2], dtype=tf.bool)
        else:
            mask = tf.range(steps)[:, None] < tf.cast(seq_length, tf.int32)[None, :]
        extra = tf.zeros(tf.shape(x)[:2], self._rnn_dtype) if extra is None else tf.cast(extra, self._rnn_dtype)

        def scan_step(carry, elems):
            state = carry[1]
            x_t, valid, extra_t = elems
            outputs, new_state = step(state, x_t, extra_t[:, None])
            valid = valid[:, None]
            new_state = tuple(tf.where(valid, new, old) for new, old in zip(new_state, state))
            y = tf.where(valid, outputs[0], tf.zeros_like(outputs[0]))
            return (y, new_state, outputs[1:])

        batch = tf.shape(x)[1]
        zeros = tf.zeros([batch, self._hidden_size], self._rnn_dtype)
        initial = (zeros, init_state, (zeros,) * gates)
        y, states, gates = tf.scan(scan_step, (x, mask, extra), initializer=initial)
        results = (y, *states, *gates)
        if not self._time_major:
            results = tuple(tf.transpose(item, [1, 0, 2]) for item in results)
        return results

    def _initial(self, value, batch, name):
        if value is None:
            return tf.zeros([batch, self._hidden_size], self._rnn_dtype, name=name)
        value = tf.convert_to_tensor(value, dtype=self._rnn_dtype)
        return tf.reshape(value, [-1, self._hidden_size])  # [1, batch, hidden] (the NPU op's layout) or [batch, hidden]


class DynamicRNN(_DynamicBasic):
    """The NPU's fused LSTM over a whole sequence: returns (y, output_h, output_c, i, j, f, o, tanhc)."""

    _BASE_NAME = "dynamic_rnn"

    def __init__(self, hidden_size, dtype, cell_type="LSTM", direction=DYNAMIC_RNN_UNIDIRECTION, cell_depth=1,
                 use_peephole=False, keep_prob=1.0, cell_clip=-1.0, num_proj=0, time_major=True, activation="tanh",
                 forget_bias=0.0, is_training=True, name=None):
        super().__init__(hidden_size, dtype, direction=direction, cell_depth=cell_depth, keep_prob=keep_prob,
                         cell_clip=cell_clip, num_proj=num_proj, time_major=time_major, activation=activation,
                         is_training=is_training, name=name)
        if cell_type != "LSTM":
            raise ValueError(f"DynamicRNN: cell_type {cell_type!r} is not supported; the NPU op runs 'LSTM' cells")
        if use_peephole:
            raise ValueError("DynamicRNN: use_peephole=True is not supported by the NPU's fused op nor by the "
                             "simulation; use tf.nn.rnn_cell.LSTMCell(use_peepholes=True) with tf.nn.dynamic_rnn")
        self._cell_type, self._use_peephole, self._forget_bias = cell_type, use_peephole, forget_bias
        self._rnn_w = self._rnn_b = None

    cell_type = property(lambda self: self._cell_type)
    use_peephole = property(lambda self: self._use_peephole)
    forget_bias = property(lambda self: self._forget_bias)

    def build(self, input_shape):
        size = self._input_size(input_shape)
        self._rnn_w = self.add_weight(
            "dynamicrnn/w", shape=[size + self._hidden_size, 4 * self._hidden_size], dtype=self._rnn_dtype,
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=10))
        self._rnn_b = self.add_weight("dynamicrnn/b", shape=[4 * self._hidden_size], dtype=self._rnn_dtype,
                                      initializer=tf.compat.v1.zeros_initializer())
        super().build(input_shape)

    def call(self, x, seq_length=None, init_h=None, init_c=None, weight=None, bias=None):  # pylint: disable=arguments-differ
        w = self._rnn_w if weight is None else weight
        b = self._rnn_b if bias is None else bias
        batch = tf.shape(x)[0 if not self._time_major else 1]
        state = (self._initial(init_h, batch, "init_h"), self._initial(init_c, batch, "init_c"))
        forget_bias = tf.cast(self._forget_bias, self._rnn_dtype)
        clip = self._cell_clip

        def step(carry, x_t, _):
            h, c = carry
            gates = tf.matmul(tf.concat([x_t, h], axis=1), w) + b
            i, j, f, o = tf.split(gates, 4, axis=1)
            i, j, f, o = tf.sigmoid(i), self._act(j), tf.sigmoid(f + forget_bias), tf.sigmoid(o)
            new_c = f * c + i * j
            if clip > 0:
                new_c = tf.clip_by_value(new_c, -clip, clip)
            tanhc = self._act(new_c)
            new_h = o * tanhc
            return (new_h, i, j, f, o, tanhc), (new_h, new_c)

        return self._run(x, seq_length, state, step, gates=5)


class _DynamicGRUBase(_DynamicBasic):
    """DynamicGRUV2 and DynamicAUGRU: GRU weights and the step, with or without the attention score."""

    _SCOPE = ""

    def __init__(self, hidden_size, dtype, direction=DYNAMIC_RNN_UNIDIRECTION, cell_depth=1, keep_prob=1.0,
                 cell_clip=-1.0, num_proj=0, time_major=True, activation="tanh", gate_order="zrh", reset_after=True,
                 is_training=True, name=None):
        super().__init__(hidden_size, dtype, direction=direction, cell_depth=cell_depth, keep_prob=keep_prob,
                         cell_clip=cell_clip, num_proj=num_proj, time_major=time_major, activation=activation,
                         is_training=is_training, name=name)
        if gate_order not in ("zrh", "rzh"):
            raise ValueError(f"{type(self).__name__}: gate_order {gate_order!r} is not one of 'zrh', 'rzh'")
        self._gate_order, self._reset_after = gate_order, reset_after
        self._weight_input = self._weight_hidden = self._bias_input = self._bias_hidden = None

    gate_order = property(lambda self: self._gate_order)
    reset_after = property(lambda self: self._reset_after)

    def build(self, input_shape):
        size, hidden = self._input_size(input_shape), self._hidden_size
        self._weight_input = self._uniform(f"{self._SCOPE}/weight_input", [size, 3 * hidden])
        self._weight_hidden = self._uniform(f"{self._SCOPE}/weight_hidden", [hidden, 3 * hidden])
        self._bias_input = self._uniform(f"{self._SCOPE}/bias_input", [3 * hidden])
        self._bias_hidden = self._uniform(f"{self._SCOPE}/bias_hidden", [3 * hidden])
        super().build(input_shape)

    def _gates(self, tensor):
        first, second, new = tf.split(tensor, 3, axis=1)
        return (first, second, new) if self._gate_order == "zrh" else (second, first, new)  # (z, r, n)

    def _gru(self, x, seq_length, init_h, attention):
        batch = tf.shape(x)[0 if not self._time_major else 1]
        w_h, b_h = self._weight_hidden, self._bias_hidden
        w_n = self._gates(w_h)[2]
        b_n = self._gates(b_h[None, :])[2]
        clip = self._cell_clip

        def step(carry, x_t, att):
            (h,) = carry
            x_z, x_r, x_n = self._gates(tf.matmul(x_t, self._weight_input) + self._bias_input)
            h_z, h_r, h_n = self._gates(tf.matmul(h, w_h) + b_h)
            z, r = tf.sigmoid(x_z + h_z), tf.sigmoid(x_r + h_r)
            hidden_new = h_n if self._reset_after else tf.matmul(r * h, w_n) + b_n
            n = self._act(x_n + (r * h_n if self._reset_after else hidden_new))
            z_att = (1.0 - att) * z
            new_h = z_att * h + (1.0 - z_att) * n
            if clip > 0:
                new_h = tf.clip_by_value(new_h, -clip, clip)
            gates = (z, z_att, r, n, hidden_new) if attention is not None else (z, r, n, hidden_new)
            return (new_h, *gates), (new_h,)

        return self._run(x, seq_length, (self._initial(init_h, batch, "init_h"),), step,
                         gates=4 if attention is None else 5, extra=attention)


class DynamicGRUV2(_DynamicGRUBase):
    """The NPU's fused GRU over a whole sequence: returns (y, output_h, update, reset, new, hidden_new)."""

    _SCOPE = "dynamicgruv2"
    _BASE_NAME = "dynamic_gru_v2"

    def call(self, x, seq_length=None, init_h=None):  # pylint: disable=arguments-differ
        return self._gru(x, seq_length, init_h, None)


class DynamicAUGRU(_DynamicGRUBase):
    """GRU with attention-scaled update gate (DIEN's AUGRU): (y, output_h, update, update_att, reset, new, hidden_new)."""

    _SCOPE = "dynamicaugru"
    _BASE_NAME = "dynamic_augru"

    def call(self, x, weight_att, seq_length=None, init_h=None):  # pylint: disable=arguments-differ
        return self._gru(x, seq_length, init_h, weight_att)
