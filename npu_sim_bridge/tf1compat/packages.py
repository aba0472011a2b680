"""TensorFlow's companion packages TF1 scripts import (tensorflow_hub, ...): the version that works with TensorFlow 2.15.

They are separate pip packages, not part of TensorFlow; npu_sim_bridge maps none of them. A script
that imports one that is not installed gets a ModuleNotFoundError naming the pip command (the hook
adds it, hook.py), and `npu-sim check` prints the same. The versions were checked against
tensorflow-cpu 2.15.1 (their Requires-Dist, and an install beside requirements-ci.txt where it is
clean); the ones that install cleanly are pyproject.toml's `tf-packages` extra.
"""

# import name -> (pip requirement that works with TensorFlow 2.15, why that one / what to know)
PACKAGES = {
    "tensorflow_hub": ("tensorflow-hub==0.15.0", "0.16 builds its KerasLayer on tf-keras, not TensorFlow 2.15's "
                                                 "tf.keras"),
    "tensorflow_datasets": ("tensorflow-datasets==4.9.4 tensorflow-metadata==1.15.0",
                            "newer tensorflow-metadata needs protobuf 5, TensorFlow 2.15 protobuf 4"),
    "tensorflow_probability": ("tensorflow-probability==0.23.0", "0.23 is the release for TensorFlow 2.15"),
    "tensorflow_model_optimization": ("tensorflow-model-optimization==0.7.5",
                                      "it needs absl-py<2: pip installs absl-py 1.4, which TensorFlow 2.15 accepts"),
    "tensorflow_gan": ("tensorflow-gan==2.1.0", "it needs tensorflow-hub and tensorflow-probability: install "
                                                "tensorflow-hub==0.15.0 and tensorflow-probability==0.23.0 with it"),
    "tensorflow_text": ("--no-deps tensorflow-text==2.15.0", "its wheel asks for the `tensorflow` distribution, "
                                                             "which tensorflow-cpu already is: hence --no-deps"),
    "tensorflow_transform": ("tensorflow-transform==1.15.0", "it depends on the `tensorflow` distribution and "
                                                             "apache-beam: use a separate environment"),
    "tensorflow_serving": ("--no-deps tensorflow-serving-api==2.15.1", "its wheel asks for the `tensorflow` "
                                                                       "distribution, which tensorflow-cpu already is: "
                                                                       "hence --no-deps"),
    "tensorflow_lite_support": ("tflite-support==0.4.4", "it needs protobuf<4, which pip installs in place of "
                                                         "protobuf 4 (TensorFlow 2.15 accepts protobuf 3.20); its "
                                                         "wheel has no custom_ops, which only a build of the "
                                                         "tflite-support sources has"),
    "tensorflowjs": ("tensorflowjs==4.15.0", "it pulls the `tensorflow` distribution, jax and "
                                             "tensorflow-decision-forests: use a separate environment"),
}


# The ones pyproject.toml's `tf-packages` extra installs (they install cleanly beside tensorflow-cpu 2.15.1).
IN_EXTRA = frozenset({"tensorflow_hub", "tensorflow_datasets", "tensorflow_probability", "tensorflow_model_optimization",
                      "tensorflow_gan"})


def install_hint(package):
    """The sentence naming the pip command for `package` (an import name), or None when it is not one of them."""
    entry = PACKAGES.get(package)
    if entry is None:
        return None
    requirement, why = entry
    return (f"{package} is a separate package, not part of TensorFlow, and it is not installed: "
            f"pip install {requirement} (the version that works with TensorFlow 2.15"
            f"{'; ' + why if why else ''})"
            + ("; or the common ones at once, in the npu_sim_bridge checkout: pip install '.[tf-packages]'"
               if package in IN_EXTRA else ""))


def raise_with_install_hint(error):
    """Re-raise a ModuleNotFoundError for one of PACKAGES with the pip command in its message; else return."""
    package = (error.name or "").partition(".")[0]
    hint = install_hint(package) if error.name == package else None
    if hint is not None:
        raise ModuleNotFoundError(f"No module named {package!r}: {hint}", name=package) from None
