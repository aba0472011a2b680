"""tf.contrib.legacy_seq2seq: decoders over lists of time steps (rnn_decoder, attention_decoder) and the losses.

Variables keep TensorFlow 1.15's names (attention_decoder/AttnW_0, attention_decoder/kernel (the input
projection), .../Attention_0/kernel, .../AttnOutputProjection/kernel), so legacy seq2seq checkpoints load.
"""

import tensorflow as tf

_V1 = tf.compat.v1


def rnn_decoder(decoder_inputs, initial_state, cell, loop_function=None, scope=None):
    """Run `cell` over the list decoder_inputs; loop_function(prev_output, i) replaces input i > 0 when given."""
    with _V1.variable_scope(scope or "rnn_decoder"):
        state, outputs, prev = initial_state, [], None
        for index, inputs in enumerate(decoder_inputs):
            if loop_function is not None and prev is not None:
                with _V1.variable_scope("loop_function", reuse=True):
                    inputs = loop_function(prev, index)
            if index > 0:
                _V1.get_variable_scope().reuse_variables()
            output, state = cell(inputs, state)
            outputs.append(output)
            if loop_function is not None:
                prev = output
    return outputs, state


def sequence_loss_by_example(logits, targets, weights, average_across_timesteps=True, softmax_loss_function=None,
                             name=None):
    """Weighted cross-entropy per example over lists of [batch, classes] logits and [batch] targets and weights."""
    if not len(logits) == len(targets) == len(weights):
        raise ValueError("sequence_loss_by_example: logits, targets and weights must be lists of the same length, "
                         f"got {len(logits)}, {len(targets)}, {len(weights)}")
    with tf.name_scope(name or "sequence_loss_by_example"):
        losses = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.reshape(target, [-1]), logits=logit)
            else:
                loss = softmax_loss_function(labels=target, logits=logit)
            losses.append(loss * weight)
        total = tf.add_n(losses)
        if average_across_timesteps:
            total /= tf.add_n(weights) + 1e-12
        return total


def sequence_loss(logits, targets, weights, average_across_timesteps=True, average_across_batch=True,
                  softmax_loss_function=None, name=None):
    """sequence_loss_by_example summed over the batch (divided by the batch size when average_across_batch)."""
    with tf.name_scope(name or "sequence_loss"):
        cost = tf.reduce_sum(sequence_loss_by_example(logits, targets, weights, average_across_timesteps,
                                                      softmax_loss_function))
        if average_across_batch:
            return cost / tf.cast(tf.shape(targets[0])[0], cost.dtype)
        return cost


def _linear(args, output_size, scope=None):
    """A dense layer over the concatenation of `args` ([batch, n] each): variables `kernel` and `bias` in `scope`
    (the current variable scope when None), as TensorFlow 1.15's core_rnn_cell._Linear named them."""
    args = tf.nest.flatten(args)
    total = sum(int(a.shape[-1]) for a in args)
    with _V1.variable_scope(scope or _V1.get_variable_scope()):
        kernel = _V1.get_variable("kernel", [total, output_size], dtype=args[0].dtype)
        bias = _V1.get_variable("bias", [output_size], dtype=args[0].dtype, initializer=_V1.zeros_initializer())
    joined = args[0] if len(args) == 1 else tf.concat(args, 1)
    return tf.nn.bias_add(tf.matmul(joined, kernel), bias)


def attention_decoder(decoder_inputs, initial_state, attention_states, cell, output_size=None, num_heads=1,
                      loop_function=None, dtype=None, scope=None, initial_state_attention=False):
    """RNN decoder with additive attention over attention_states [batch, length, size] (Bahdanau et al. 2015).

    At each step the input is projected together with the previous attention reads, the cell runs, and
    num_heads attention heads read attention_states with the new state as query; the output is a
    projection of the cell output and the reads to output_size (cell.output_size by default).
    loop_function(prev_output, i) replaces input i > 0 when given. Returns (outputs, final state).
    """
    if not decoder_inputs:
        raise ValueError("attention_decoder: decoder_inputs must be a non-empty list of [batch, input] tensors")
    if num_heads < 1:
        raise ValueError(f"attention_decoder: num_heads must be at least 1, got {num_heads}")
    if attention_states.shape.rank != 3 or attention_states.shape[2] is None:
        raise ValueError(f"attention_decoder: attention_states must be [batch, length, size] with a known size, got "
                         f"shape {attention_states.shape}")
    output_size = cell.output_size if output_size is None else output_size
    with _V1.variable_scope(scope or "attention_decoder", dtype=dtype) as outer:
        dtype = outer.dtype
        length, size = tf.shape(attention_states)[1], int(attention_states.shape[2])
        hidden = tf.expand_dims(attention_states, 2)  # [batch, length, 1, size]
        features, vectors = [], []
        for head in range(num_heads):
            weights = _V1.get_variable(f"AttnW_{head}", [1, 1, size, size])
            features.append(tf.nn.conv2d(hidden, weights, [1, 1, 1, 1], "SAME"))
            vectors.append(_V1.get_variable(f"AttnV_{head}", [size]))

        def attention(query):
            query = tf.concat(tf.nest.flatten(query), 1) if tf.nest.is_nested(query) else query
            reads = []
            for head in range(num_heads):
                projected = tf.reshape(_linear(query, size, f"Attention_{head}"), [-1, 1, 1, size])
                scores = tf.reduce_sum(vectors[head] * tf.tanh(features[head] + projected), [2, 3])
                weights = tf.reshape(tf.nn.softmax(scores), [-1, length, 1, 1])
                reads.append(tf.reshape(tf.reduce_sum(weights * hidden, [1, 2]), [-1, size]))
            return reads

        batch = tf.shape(decoder_inputs[0])[0]
        reads = [tf.zeros(tf.stack([batch, size]), dtype=dtype) for _ in range(num_heads)]
        for read in reads:
            read.set_shape([None, size])
        if initial_state_attention:
            reads = attention(initial_state)
        state, outputs, prev = initial_state, [], None
        for index, inputs in enumerate(decoder_inputs):
            if index > 0:
                _V1.get_variable_scope().reuse_variables()
            if loop_function is not None and prev is not None:
                with _V1.variable_scope("loop_function", reuse=True):
                    inputs = loop_function(prev, index)
            cell_input = _linear([inputs] + reads, int(inputs.shape[-1]))
            cell_output, state = cell(cell_input, state)
            if index == 0 and initial_state_attention:
                with _V1.variable_scope(_V1.get_variable_scope(), reuse=True):
                    reads = attention(state)
            else:
                reads = attention(state)
            output = _linear([cell_output] + reads, output_size, "AttnOutputProjection")
            if loop_function is not None:
                prev = output
            outputs.append(output)
    return outputs, state
