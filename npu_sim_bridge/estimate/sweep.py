"""The model sweep at its usual training sizes, for estimating: each model's input size, batch and published 910 figure.

The model sweep (npu_sim_bridge/testing/zoo.py) builds its Keras applications at 32x32 (or 71/75) so that they
train fast on a CPU. Estimating builds the graph only (nothing runs), so here each application is built at the
input size it is trained at (its Keras default: 224, 299 for InceptionV3, InceptionResNetV2 and Xception), with
1,000 classes and at a usual per-device training batch: the batch of the published Ascend 910 figure where there
is one, else 256 for ResNets and mobile networks and 128 or 64 for the larger ones. MobileNetV2 is built at
width 1.0 (the sweep's 0.35 is a CPU shortcut). The sweep's other graphs (small CNNs, MLPs, an LSTM, a small
BERT) keep the sizes they are built with; ResNet-50, BERT-base and BERT-Large are added at their usual sizes.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable


@dataclasses.dataclass(frozen=True)
class SweepModel:
    """A model to estimate: how to build it, the batch it is estimated at (None: its own), its input size."""

    name: str
    build: Callable
    batch: int | None
    size: str


@dataclasses.dataclass(frozen=True)
class Published:
    """A published Ascend 910 training throughput: per device, at a batch, and where it is from."""

    batch: int
    samples_per_s: float
    source: str


# Keras application -> (input size, batch, builder keyword arguments).
APPLICATIONS: dict = {
    "MobileNetV2": (224, 256, {"alpha": 1.0}),
    "ResNet50": (224, 256, {}),
    "ResNet50V2": (224, 256, {}),
    "DenseNet121": (224, 32, {}),
    "EfficientNetB0": (224, 128, {}),
    "VGG16": (224, 64, {}),
    "InceptionV3": (299, 128, {}),
    "InceptionResNetV2": (299, 64, {}),
    "Xception": (299, 128, {}),
    "NASNetMobile": (224, 128, {}),
    "MobileNetV3Small": (224, 256, {}),
    "EfficientNetV2B0": (224, 128, {}),
    "ConvNeXtTiny": (224, 128, {}),
    "RegNetX002": (224, 256, {}),
}

# Per-device figures of MindSpore ModelZoo READMEs and benchmark pages (one Ascend 910; an 8-device figure is
# divided by 8). Not the same code as the Keras graphs estimated here: layer details, classes and input
# pipelines differ, so read a gap within ~30% as agreement.
PUBLISHED: dict = {
    "resnet50_b256": Published(256, 2115.0, "MindSpore r0.5 benchmark page, ResNet-50 v1.5, mixed (anchor)"),
    "resnet50_b32": Published(32, 1787.0, "MindSpore 0.2 benchmark page, ResNet-50 v1.5 batch 32, mixed"),
    "ResNet50": Published(256, 2115.0, "as resnet50_b256 (Keras ResNet50 is v1, the page's v1.5)"),
    "bert_large_b96": Published(96, 269.0, "MindSpore r0.5 benchmark page, seq 128 (anchor); 210 on 0.2"),
    "DenseNet121": Published(32, 760.0, "MindSpore ModelZoo densenet121 README, 1 device, batch 32"),
    "InceptionV3": Published(128, 128 / 0.1286, "MindSpore ModelZoo inceptionv3 README, 128.6 ms/step, 8p"),
    "Xception": Published(128, 128 / 0.479, "MindSpore ModelZoo xception README, 479 ms/step, 8p"),
    "VGG16": Published(64, 64 / 0.079, "MindSpore ModelZoo vgg16 README, 79 ms/step, 1 device (CIFAR-10 "
                                       "resized to 224, batch norm, 10 classes)"),
}


def sweep_models() -> dict:
    """{name: SweepModel}: the model sweep at its usual training sizes, then ResNet-50, BERT-base, BERT-Large."""
    from npu_sim_bridge.testing import models, zoo

    found = {}
    for name, builder in zoo.sweep_builders().items():
        if name in APPLICATIONS:
            size, batch, kwargs = APPLICATIONS[name]
            build = functools.partial(zoo.keras_application, name, image_size=size, num_classes=1000, **kwargs)
            found[name] = SweepModel(name, build, batch, f"{size}x{size}")
        else:
            found[name] = SweepModel(name, builder, None, "as built")
    found["resnet50_b256"] = SweepModel("resnet50_b256", functools.partial(models.resnet50, batch_size=256),
                                        256, "224x224")
    found["resnet50_b32"] = SweepModel("resnet50_b32", functools.partial(models.resnet50, batch_size=32),
                                       32, "224x224")
    found["bert_base_b32"] = SweepModel("bert_base_b32", functools.partial(models.bert, batch_size=32,
                                                                           dropout=0.0), 32, "seq 128")
    found["bert_large_b96"] = SweepModel(
        "bert_large_b96", functools.partial(models.bert, batch_size=96, num_layers=24, hidden=1024, heads=16,
                                            intermediate=4096, dropout=0.0), 96, "seq 128")
    return found
