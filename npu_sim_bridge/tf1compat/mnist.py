"""tensorflow.examples.tutorials.mnist.input_data (and tf.contrib.learn.datasets.mnist): MNIST from local .gz files.

read_data_sets(train_dir) reads the four files of the MNIST distribution from train_dir
(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
t10k-labels-idx1-ubyte.gz; uncompressed copies without .gz also do). Nothing is downloaded: a
missing file is an error naming it and the folder.
"""

import collections
import gzip
import os
import types

import numpy as np

FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
         "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049

Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


def _open(train_dir, stem):
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        path = os.path.join(train_dir, name)
        if os.path.isfile(path):
            return path, opener(path, "rb")
    raise FileNotFoundError(
        f"MNIST file {stem}.gz not found in {os.path.abspath(train_dir)!r}: read_data_sets does not download; put "
        f"the four MNIST files ({', '.join(s + '.gz' for s in FILES.values())}) in that folder")


def _read_idx(train_dir, stem, magic):
    path, handle = _open(train_dir, stem)
    with handle:
        data = handle.read()
    header = np.frombuffer(data[:8], dtype=">u4")
    if len(data) < 8 or header[0] != magic:
        raise ValueError(f"{path}: not an MNIST {'image' if magic == _IMAGES_MAGIC else 'label'} file "
                         f"(magic number {int(header[0]) if len(header) else None}, expected {magic})")
    count = int(header[1])
    if magic == _IMAGES_MAGIC:
        rows, cols = (int(v) for v in np.frombuffer(data[8:16], dtype=">u4"))
        array = np.frombuffer(data, dtype=np.uint8, offset=16)
        expected = count * rows * cols
        shape = (count, rows, cols, 1)
    else:
        array = np.frombuffer(data, dtype=np.uint8, offset=8)
        expected = count
        shape = (count,)
    if array.size != expected:
        raise ValueError(f"{path}: truncated: the header says {count} items, the file holds {array.size} values "
                         f"where {expected} are needed")
    return array.reshape(shape)


def dense_to_one_hot(labels, num_classes=10):
    """[N] class ids -> [N, num_classes] one-hot rows."""
    one_hot = np.zeros((labels.shape[0], num_classes), dtype=np.float64)
    one_hot[np.arange(labels.shape[0]), labels] = 1.0
    return one_hot


class DataSet:
    """One split: images, labels, num_examples, epochs_completed, next_batch(batch_size, fake_data, shuffle)."""

    def __init__(self, images, labels, fake_data=False, one_hot=False, dtype=np.float32, reshape=True, seed=None):
        if fake_data:
            raise ValueError("DataSet(fake_data=True) is not provided: read the real MNIST files")
        dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
        if dtype not in (np.uint8, np.float32):
            raise TypeError(f"DataSet: dtype must be uint8 or float32, got {dtype}")
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"DataSet: {images.shape[0]} images but {labels.shape[0]} labels")
        if reshape:
            images = images.reshape(images.shape[0], -1)
        if dtype == np.float32:
            images = images.astype(np.float32) * (1.0 / 255.0)
        self._images, self._labels = images, labels
        self._num_examples = images.shape[0]
        self._epochs_completed = 0
        self._index_in_epoch = 0
        self._rng = np.random.RandomState(seed)
        self.one_hot = one_hot

    images = property(lambda self: self._images)
    labels = property(lambda self: self._labels)
    num_examples = property(lambda self: self._num_examples)
    epochs_completed = property(lambda self: self._epochs_completed)

    def _shuffle(self):
        order = self._rng.permutation(self._num_examples)
        self._images, self._labels = self._images[order], self._labels[order]

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        """The next batch_size examples; at the end of an epoch the rest plus the start of the next (reshuffled)."""
        if fake_data:
            raise ValueError("next_batch(fake_data=True) is not provided: read the real MNIST files")
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            self._shuffle()
        if start + batch_size <= self._num_examples:
            self._index_in_epoch += batch_size
            return self._images[start:self._index_in_epoch], self._labels[start:self._index_in_epoch]
        self._epochs_completed += 1
        rest_images, rest_labels = self._images[start:], self._labels[start:]
        if shuffle:
            self._shuffle()
        self._index_in_epoch = batch_size - rest_images.shape[0]
        end = self._index_in_epoch
        return (np.concatenate((rest_images, self._images[:end]), axis=0),
                np.concatenate((rest_labels, self._labels[:end]), axis=0))


def read_data_sets(train_dir, fake_data=False, one_hot=False, dtype=np.float32, reshape=True, validation_size=5000,
                   seed=None, source_url=None):  # pylint: disable=unused-argument  (nothing is downloaded)
    """Datasets(train, validation, test) from the MNIST files in train_dir (the first validation_size train images
    form the validation split)."""
    if fake_data:
        raise ValueError("read_data_sets(fake_data=True) is not provided: read the real MNIST files")
    train_images = _read_idx(train_dir, FILES["train_images"], _IMAGES_MAGIC)
    train_labels = _read_idx(train_dir, FILES["train_labels"], _LABELS_MAGIC)
    test_images = _read_idx(train_dir, FILES["test_images"], _IMAGES_MAGIC)
    test_labels = _read_idx(train_dir, FILES["test_labels"], _LABELS_MAGIC)
    if one_hot:
        train_labels, test_labels = dense_to_one_hot(train_labels), dense_to_one_hot(test_labels)
    if not 0 <= validation_size <= len(train_images):
        raise ValueError(f"validation_size should be between 0 and {len(train_images)}, got {validation_size}")
    options = {"one_hot": one_hot, "dtype": dtype, "reshape": reshape, "seed": seed}
    return Datasets(train=DataSet(train_images[validation_size:], train_labels[validation_size:], **options),
                    validation=DataSet(train_images[:validation_size], train_labels[:validation_size], **options),
                    test=DataSet(test_images, test_labels, **options))


def load_mnist(train_dir="MNIST-data"):
    """tf.contrib.learn.datasets.mnist.load_mnist: read_data_sets(train_dir)."""
    return read_data_sets(train_dir)


def _namespace(name, children):
    module = types.ModuleType(name, f"{name} (TensorFlow 1.15)")
    module.__path__ = []
    for key, value in children.items():
        setattr(module, key, value)
    return module


def _input_data_module(name):
    module = types.ModuleType(name, __doc__)
    for key in ("read_data_sets", "DataSet", "Datasets", "dense_to_one_hot", "load_mnist"):
        setattr(module, key, globals()[key])
    return module


def examples_module():
    """tensorflow.examples, holding tutorials.mnist.input_data."""
    input_data = _input_data_module("tensorflow.examples.tutorials.mnist.input_data")
    mnist = _namespace("tensorflow.examples.tutorials.mnist", {"input_data": input_data})
    return _namespace("tensorflow.examples", {"tutorials": _namespace("tensorflow.examples.tutorials",
                                                                      {"mnist": mnist})})


def learn_datasets_module():
    """tf.contrib.learn.datasets, holding mnist (read_data_sets, load_mnist)."""
    mnist = _input_data_module("tensorflow.contrib.learn.datasets.mnist")
    return _namespace("tensorflow.contrib.learn.datasets", {"mnist": mnist})
