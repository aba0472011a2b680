"""tf.contrib.training.bucket and bucket_by_sequence_length: queue-based batching by bucket, in the TF1 graph.

Each example (a nest of tensors) goes to the queue of its bucket; a batch is taken from one bucket
at a time, so a batch holds examples of one bucket only (with dynamic_pad, padded to its longest).
Queue runners (in the QUEUE_RUNNERS collection, started by tf.train.start_queue_runners) move the
examples, as tf.train.batch's do; when the input ends, the buckets' remaining full batches (and,
with allow_smaller_final_batch, the partial ones) come out, then OutOfRangeError.
"""

import tensorflow as tf

_V1 = tf.compat.v1


def _flat_shapes(shapes):
    """The shapes given for a nest of tensors, in tf.nest.flatten's order (a dict's by sorted key)."""
    if isinstance(shapes, dict):
        return [shapes[k] for k in sorted(shapes)]
    return list(shapes)


def _shapes(flat, shapes, dynamic_pad):
    if shapes is not None:
        shapes = [tf.TensorShape(shape) for shape in _flat_shapes(shapes)]
        if len(shapes) != len(flat):
            raise ValueError(f"bucket: shapes has {len(shapes)} entries for {len(flat)} tensors")
        return shapes
    shapes = [t.shape for t in flat]
    if not dynamic_pad:
        unknown = [t.name for t in flat if not t.shape.is_fully_defined()]
        if unknown:
            raise ValueError(f"bucket: the shapes of {unknown} are not fully known; pass shapes=..., or "
                             "dynamic_pad=True to pad each batch to its longest example")
    return shapes


def bucket(tensors, which_bucket, batch_size, num_buckets, num_threads=1, capacity=32, bucket_capacities=None,
           shapes=None, dynamic_pad=False, allow_smaller_final_batch=False, keep_input=True, shared_name=None,
           name=None):
    """Batches of `tensors` (a nest) taken from one bucket each: returns (bucket index [], batched nest)."""
    if bucket_capacities is not None and len(bucket_capacities) != num_buckets:
        raise ValueError(f"bucket: bucket_capacities has {len(bucket_capacities)} entries for {num_buckets} buckets")
    flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(tensors)]
    shapes = _shapes(flat, shapes, dynamic_pad)
    dtypes = [t.dtype for t in flat]
    queue_class = _V1.PaddingFIFOQueue if dynamic_pad else _V1.FIFOQueue
    with tf.name_scope(name or "bucket"):
        queues = [queue_class(capacity=(bucket_capacities or [capacity] * num_buckets)[i], dtypes=dtypes,
                              shapes=shapes, shared_name=f"{shared_name}_{i}" if shared_name else None,
                              name=f"bucket_queue_{i}") for i in range(num_buckets)]
        chosen = tf.queue.QueueBase.from_list(tf.cast(which_bucket, tf.int32), queues)
        if keep_input is True:
            enqueue = chosen.enqueue(flat)
        else:  # an example with keep_input false is dropped
            enqueue = _V1.cond(tf.convert_to_tensor(keep_input), lambda: chosen.enqueue(flat), tf.no_op)
        close_all = tf.group(*[q.close() for q in queues])
        cancel_all = tf.group(*[q.close(cancel_pending_enqueues=True) for q in queues])
        _V1.train.add_queue_runner(_V1.train.QueueRunner(queues[0], [enqueue] * num_threads, close_op=close_all,
                                                         cancel_op=cancel_all))
        batch_dim = None if allow_smaller_final_batch else batch_size
        top = _V1.PaddingFIFOQueue(capacity=capacity, dtypes=[tf.int32] + dtypes,
                                   shapes=[tf.TensorShape([])] + [tf.TensorShape([batch_dim]).concatenate(s)
                                                                  for s in shapes], name="batches")
        moves = []
        for index, queue in enumerate(queues):
            batch = queue.dequeue_up_to(batch_size) if allow_smaller_final_batch else queue.dequeue_many(batch_size)
            batch = batch if isinstance(batch, list) else [batch]
            moves.append(top.enqueue([tf.constant(index, tf.int32)] + batch))
        _V1.train.add_queue_runner(_V1.train.QueueRunner(top, moves, close_op=top.close(),
                                                         cancel_op=top.close(cancel_pending_enqueues=True)))
        dequeued = top.dequeue(name="dequeue")
        return dequeued[0], tf.nest.pack_sequence_as(tensors, dequeued[1:])


def bucket_by_sequence_length(input_length, tensors, batch_size, bucket_boundaries, num_threads=1, capacity=32,
                              bucket_capacities=None, shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
                              keep_input=True, shared_name=None, name=None):
    """bucket() with buckets of input_length: [-inf, b0), [b0, b1), ..., [b_last, inf).
    Returns (the batch's input lengths, the batched nest)."""
    boundaries = list(bucket_boundaries)
    if not boundaries or boundaries != sorted(set(boundaries)):
        raise ValueError(f"bucket_by_sequence_length: bucket_boundaries must be a non-empty increasing list, got "
                         f"{boundaries}")
    with tf.name_scope(name or "bucket_by_sequence_length"):
        length = tf.cast(input_length, tf.int32)
        which = tf.reduce_sum(tf.cast(tf.constant(boundaries, tf.int32) <= length, tf.int32))
        flat_shapes = None if shapes is None else [tf.TensorShape([])] + _flat_shapes(shapes)
        index, (lengths, batched) = bucket((length, tensors), which, batch_size, len(boundaries) + 1, num_threads,
                                           capacity, bucket_capacities, flat_shapes, dynamic_pad,
                                           allow_smaller_final_batch, keep_input, shared_name)
        del index
        return lengths, batched
