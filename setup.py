"""The one build step pyproject.toml cannot declare: copy the top-level ops_info/ library into the package.

Everything else (metadata, dependencies, the npu-sim command, package data) is in pyproject.toml.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithOpsInfo(build_py):
    """Copies the top-level ops_info/ JSON library into the package as npu_sim_bridge/_ops_info_data.

    An editable install (pip install -e .) reads <checkout>/ops_info directly instead.
    """

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


setup(cmdclass={"build_py": BuildWithOpsInfo})
