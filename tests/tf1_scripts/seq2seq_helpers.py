"""A TF 1.15 seq2seq decoder: NASCell, TrainingHelper for training, GreedyEmbeddingHelper / SampleEmbeddingHelper
for inference sharing the variables, dynamic_decode; trained through the NpuOptimizer until greedy decoding
gives back the training sequences."""
import numpy as np
import tensorflow as tf
from tensorflow.contrib.seq2seq.python.ops.helper import Helper
from npu_bridge.npu_init import npu_config_proto

tf.set_random_seed(1)
vocab, batch, go, eos = 6, 3, 1, 0
sequences = np.array([[2, 3, 4, 0], [3, 3, 0, 0], [5, 0, 0, 0]], np.int32)  # targets, each ended by eos (0)
lengths = np.array([4, 3, 2], np.int32)
decoder_inputs = np.concatenate([np.full([batch, 1], go, np.int32), sequences[:, :-1]], axis=1)

embeddings = tf.get_variable("embeddings", [vocab, 5])
cell = tf.contrib.rnn.NASCell(16)
projection = tf.layers.Dense(vocab, name="projection")
source = tf.get_variable("source_states", [batch, 16])  # one learned initial state per sequence: its "encoding"
initial_state = tf.nn.rnn_cell.LSTMStateTuple(source, tf.zeros([batch, 16]))
with tf.variable_scope("decode"):
    helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(embeddings, decoder_inputs), lengths)
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, initial_state, projection)
    trained, _, trained_lengths = tf.contrib.seq2seq.dynamic_decode(decoder, impute_finished=True,
                                                                    maximum_iterations=4)
with tf.variable_scope("decode", reuse=True):
    greedy = tf.contrib.seq2seq.GreedyEmbeddingHelper(embeddings, tf.fill([batch], go), eos)
    decoded, _, decoded_lengths = tf.contrib.seq2seq.dynamic_decode(
        tf.contrib.seq2seq.BasicDecoder(cell, greedy, initial_state, projection), maximum_iterations=6)
    sampling = tf.contrib.seq2seq.SampleEmbeddingHelper(lambda ids: tf.nn.embedding_lookup(embeddings, ids),
                                                        tf.fill([batch], go), eos, seed=3)
    sampled, _, _ = tf.contrib.seq2seq.dynamic_decode(
        tf.contrib.seq2seq.BasicDecoder(cell, sampling, initial_state, projection), maximum_iterations=6)

mask = tf.sequence_mask(lengths, 4, dtype=tf.float32)
loss = tf.contrib.seq2seq.sequence_loss(trained.rnn_output, sequences, mask)
train = tf.train.AdamOptimizer(0.05).minimize(loss)
with tf.Session(config=npu_config_proto()) as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss)
    for _ in range(80):
        sess.run(train)
    last, ids, ids_lengths, drawn, train_lengths = sess.run(
        [loss, decoded.sample_id, decoded_lengths, sampled.sample_id, trained_lengths])
matches = all(ids[row, :lengths[row]].tolist() == sequences[row, :lengths[row]].tolist() for row in range(batch))
names = sorted(v.op.name for v in tf.trainable_variables())
print("S2S trained", bool(last < first / 10), "greedy_matches", matches, "lengths", ids_lengths.tolist(),
      "train_lengths", train_lengths.tolist(), "sampled_shape", list(drawn.shape[:1]),
      "is_helper", issubclass(tf.contrib.seq2seq.TrainingHelper, Helper))
print("S2S variables", " ".join(names))

# attention (tensorflow_addons' mechanisms) inside the TF1 decoder: AttentionWrapper.zero_state(...).clone(...)
with tf.Graph().as_default():
    memory = tf.constant(np.random.RandomState(0).rand(batch, 4, 6).astype(np.float32))
    encoder_state = tf.nn.rnn_cell.LSTMStateTuple(tf.ones([batch, 6]), tf.ones([batch, 6]))
    mechanism = tf.contrib.seq2seq.LuongAttention(6, memory, memory_sequence_length=[4, 3, 2])
    attention_cell = tf.contrib.seq2seq.AttentionWrapper(tf.nn.rnn_cell.LSTMCell(6), mechanism, attention_layer_size=6)
    start = attention_cell.zero_state(batch, tf.float32).clone(cell_state=encoder_state)
    table = tf.get_variable("embeddings", [vocab, 5])
    attention_helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(table, decoder_inputs), lengths)
    attended, attended_state, _ = tf.contrib.seq2seq.dynamic_decode(
        tf.contrib.seq2seq.BasicDecoder(attention_cell, attention_helper, start, tf.layers.Dense(vocab)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        logits, alignments = sess.run([attended.rnn_output, attended_state.alignments])
print("S2S attention", logits.shape, alignments.shape, bool(np.allclose(alignments.sum(axis=1), 1.0, atol=1e-5)),
      bool(np.all(alignments[2, 2:] == 0)))
