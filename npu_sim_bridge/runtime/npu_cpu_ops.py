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
