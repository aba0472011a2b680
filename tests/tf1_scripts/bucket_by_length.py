"""tf.contrib.training.bucket_by_sequence_length in a queue-runner input pipeline: batches of one bucket each,
padded to their longest example; keep_input drops examples."""
import numpy as np
import tensorflow as tf


def run(keep_short):
    with tf.Graph().as_default():
        lengths = tf.constant([1, 4, 2, 5, 2, 6, 1, 3])
        index = tf.train.range_input_producer(8, num_epochs=1, shuffle=False).dequeue()
        length = tf.gather(lengths, index)
        sequence = tf.range(1, length + 1)
        got_lengths, (padded, ids) = tf.contrib.training.bucket_by_sequence_length(
            length, [sequence, index], batch_size=2, bucket_boundaries=[3], dynamic_pad=True,
            allow_smaller_final_batch=True, keep_input=True if keep_short else length > 1)
        batches = []
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            try:
                while True:
                    batches.append(sess.run([got_lengths, padded, ids]))
            except tf.errors.OutOfRangeError:
                pass
            coord.request_stop()
            coord.join(threads)
    one_bucket = all(len({int(n >= 3) for n in lengths}) == 1 for lengths, _, _ in batches)
    padded_right = all(rows.shape[1] == max(lengths) and all(
        (row[:n] == np.arange(1, n + 1)).all() and (row[n:] == 0).all() for row, n in zip(rows, lengths))
        for lengths, rows, _ in batches)
    return len(batches), sorted(i for _, _, ids in batches for i in ids.tolist()), one_bucket, padded_right


print("BUCKET all", *run(True))
print("BUCKET kept", *run(False))
