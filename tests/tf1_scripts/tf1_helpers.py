"""The scripts' own helper module: its `import tensorflow as tf` gets the TF1 API too (it is user code)."""
import tensorflow as tf


def mlp(inputs, hidden=8):
    """Two tf.layers.dense layers with a tf.contrib.layers regularizer, TF 1.15 style."""
    with tf.variable_scope("mlp"):
        net = tf.layers.dense(inputs, hidden, activation=tf.nn.relu,
                              kernel_initializer=tf.contrib.layers.xavier_initializer(),
                              kernel_regularizer=tf.contrib.layers.l2_regularizer(1e-4))
        return tf.layers.dense(net, 1)


def uses_a_tensorflow2_name():
    """tf.optimizers exists only in TensorFlow 2's API: under the TF1 mapping this line raises."""
    return tf.optimizers.SGD
