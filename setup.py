"""Packaging for npu_sim_bridge: the library, the npu-sim command and the operator library data."""

import os
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithOpsInfo(build_py):
    """Copies the top-level ops_info/ JSON library into the package as npu_sim_bridge/_ops_info_data."""

    def run(self):
        super().run()
        source = os.path.join(HERE, "ops_info")
        target = os.path.join(self.build_lib, "npu_sim_bridge", "_ops_info_data")
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.makedirs(target)
        for name in sorted(os.listdir(source)):
            if name.endswith(".json"):
                shutil.copy2(os.path.join(source, name), target)


with open(os.path.join(HERE, "README.md"), encoding="utf-8") as handle:
    long_description = handle.read()

setup(
    name="npu_sim_bridge",
    version="0.1.0",
    description="Ascend's TensorFlow adapter (npu_bridge) simulated on plain TensorFlow 2.15",
    long_description=long_description,
    long_description_content_type="text/markdown",
    # The code uses Python 3.10 syntax at import time and CI runs 3.11; TensorFlow 2.15 has no 3.12 wheel.
    python_requires=">=3.11,<3.12",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "License :: OSI Approved :: Apache Software License",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=find_packages(include=["npu_sim_bridge", "npu_sim_bridge.*"]),
    package_data={"npu_sim_bridge.native": ["*.cc"], "npu_sim_bridge.precision_tool": ["*.cfg"],
                  "npu_sim_bridge.report": ["*.html", "*.js"]},
    cmdclass={"build_py": BuildWithOpsInfo},
    # TensorFlow itself is not a hard requirement so that users keep the build they have
    # (tensorflow, tensorflow-cpu or tensorflow[and-cuda] 2.15); the extras install one.
    install_requires=["numpy>=1.23,<2", "protobuf>=3.20.3,<5"],
    extras_require={
        "cpu": ["tensorflow-cpu>=2.15,<2.16", "tensorflow-estimator>=2.15,<2.16"],
        "gpu": ["tensorflow[and-cuda]>=2.15,<2.16", "tensorflow-estimator>=2.15,<2.16"],
        "test": ["pytest", "hypothesis", "pillow"],
    },
    entry_points={"console_scripts": ["npu-sim=npu_sim_bridge.cli.main:main"]},
)
