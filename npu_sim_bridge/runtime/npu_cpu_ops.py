"""npu_bridge.npu_cpu.npu_cpu_ops: the AI CPU ops scripts call, built from TensorFlow ops."""

import tensorflow as tf


def randomchoicewithmask(x, count, seed=0, seed2=0):
    """Pick up to `count` true positions of the bool tensor x at random (AI CPU op RandomChoiceWithMask).

    Returns (y, mask): y int32 [count, rank of x], the coordinates of the chosen elements in random
    order (rows past the number of true elements are zeros), and mask bool [count], True where a row
    of y is a real choice. seed/seed2 as TensorFlow's random ops (0, 0: nondeterministic).
    """
    x = tf.convert_to_tensor(x)
    if x.dtype != tf.bool:
        raise TypeError(f"randomchoicewithmask: x must be a bool tensor, got {x.dtype.name}")
    if not isinstance(count, int) or count <= 0:
        raise ValueError(f"randomchoicewithmask: count must be a positive int, got {count!r}")
    with tf.name_scope("RandomChoiceWithMask"):
        positions = tf.cast(tf.where(x), tf.int32)
        order = tf.random.shuffle(tf.range(tf.shape(positions)[0]), seed=seed or seed2 or None)
        chosen = tf.gather(positions, order[:count])
        found = tf.shape(chosen)[0]
        y = tf.pad(chosen, [[0, count - found], [0, 0]])
        y = tf.reshape(y, [count, x.shape.rank if x.shape.rank is not None else -1])
        mask = tf.range(count) < found
        return y, mask


def embeddingrankid(addr_tensor, index, row_memory=320, mode="mod"):
    """Where each embedding row lives (AI CPU op EmbeddingRankId): its server's rank, its address, its size.

    addr_tensor: uint64 [servers, 3], one row per server holding part of a host embedding table:
    (rank id, base address, bytes held). index: 1-D int32/int64/uint64 row numbers. Each table row
    takes row_memory bytes. mode 'mod': row i is on server i % servers, local row i // servers;
    mode 'order': the servers hold consecutive blocks of rows, bytes held / row_memory rows each, in
    table order. Returns uint64 [len(index), 3]: (rank id, base address + local row * row_memory,
    row_memory), the rows remote_read takes. A row beyond what its server holds, or a negative
    one, fails when run (InvalidArgumentError naming it).
    """
    if mode not in ("mod", "order"):
        raise ValueError(f"embeddingrankid: mode {mode!r} is invalid, it should be one of: mod, order")
    if not isinstance(row_memory, int) or row_memory <= 0:
        raise ValueError(f"embeddingrankid: row_memory must be a positive int (bytes per row), got {row_memory!r}")
    table = tf.convert_to_tensor(addr_tensor)
    if table.dtype != tf.uint64:
        raise TypeError(f"embeddingrankid: addr_tensor must be uint64, got {table.dtype.name}")
    if table.shape.rank is not None and (table.shape.rank != 2 or table.shape[-1] not in (None, 3)):
        raise ValueError(f"embeddingrankid: addr_tensor must be [servers, 3] (rank id, base address, bytes), got "
                         f"shape {table.shape}")
    index = tf.convert_to_tensor(index)
    if index.dtype not in (tf.int32, tf.int64, tf.uint64):
        raise TypeError(f"embeddingrankid: index must be int32, int64 or uint64, got {index.dtype.name}")
    with tf.name_scope("EmbeddingRankId"):
        table = tf.cast(table, tf.int64)
        rows = tf.cast(tf.reshape(index, [-1]), tf.int64)
        ranks, bases, capacity = table[:, 0], table[:, 1], table[:, 2] // row_memory
        servers = tf.shape(table, out_type=tf.int64)[0]
        if mode == "mod":
            server, local = rows % servers, rows // servers
        else:
            ends = tf.cumsum(capacity)
            server = tf.minimum(tf.searchsorted(ends, rows, side="right", out_type=tf.int64), servers - 1)
            local = rows - (tf.gather(ends, server) - tf.gather(capacity, server))
        checks = [tf.debugging.assert_non_negative(rows, message="embeddingrankid: negative index"),
                  tf.debugging.assert_less(local, tf.gather(capacity, server),
                                           message="embeddingrankid: index beyond the rows its server holds "
                                                   "(addr_tensor[:, 2] bytes / row_memory)")]
        with tf.control_dependencies(checks):
            address = tf.gather(bases, server) + local * row_memory
            result = tf.stack([tf.gather(ranks, server), address, tf.fill(tf.shape(rows), tf.constant(
                row_memory, tf.int64))], axis=1)
        return tf.cast(result, tf.uint64)
