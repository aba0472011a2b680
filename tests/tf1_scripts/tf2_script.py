"""A script already written for TensorFlow 2 (eager, tf.function, tf.optimizers): `npu-sim run --tf2` leaves it be."""
import tensorflow as tf

weight = tf.Variable(1.0)
optimizer = tf.optimizers.SGD(0.1)


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = (weight * 3.0 - 6.0) ** 2
    optimizer.apply_gradients(zip(tape.gradient(loss, [weight]), [weight]))
    return loss


for _ in range(3):
    train_step()
print("TF2 eager", tf.executing_eagerly(), "weight", round(float(weight.numpy()), 4))
