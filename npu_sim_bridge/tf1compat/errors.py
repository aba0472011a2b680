"""The errors and warnings of the TensorFlow 1.15 compatibility layer."""


class TF1AttributeError(AttributeError):
    """A name TensorFlow 1.15 scripts use that the TF1 view of TensorFlow 2.15 does not have."""


class TF1ContribError(TF1AttributeError):
    """A tf.contrib name with no TensorFlow 2.15 equivalent here; the message says what to use."""


class TF1CompatWarning(UserWarning):
    """A TF1 script imported or called a part of TensorFlow 1.15 that has no effect, or fails once it is used."""
