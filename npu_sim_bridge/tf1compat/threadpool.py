"""tensorflow.python.data.experimental.ops.threadpool of TensorFlow 1.15, on tf.data's threading options."""

import tensorflow as tf


class PrivateThreadPool:
    """A thread pool for one dataset's ops: `num_threads` threads (max_intra_op_parallelism per op)."""

    def __init__(self, num_threads, display_name=None, max_intra_op_parallelism=1):
        if int(num_threads) < 1:
            raise ValueError(f"PrivateThreadPool: num_threads must be at least 1, got {num_threads!r}")
        self.num_threads = int(num_threads)
        self.display_name = display_name or "private_threadpool"
        self.max_intra_op_parallelism = int(max_intra_op_parallelism)


def override_threadpool(dataset, thread_pool):
    """`dataset` whose ops run in `thread_pool`: tf.data's private_threadpool_size (and max_intra_op_parallelism)."""
    if not isinstance(thread_pool, PrivateThreadPool):
        raise TypeError(f"override_threadpool expects a PrivateThreadPool, got {type(thread_pool).__name__}")
    options = tf.data.Options()
    options.threading.private_threadpool_size = thread_pool.num_threads
    options.threading.max_intra_op_parallelism = thread_pool.max_intra_op_parallelism
    return dataset.with_options(options)
