"""The npu_bridge alias for the Python child processes of a script under `npu-sim run`.

The alias is a finder in the script's own process; a child process (`subprocess.run([sys.executable,
"-c", "import npu_bridge"])`, a multiprocessing worker started by spawn) starts without it. `npu-sim run`
therefore puts `child_path/` on the children's PYTHONPATH (`for_children`): its `npu_bridge`, `hccl` and
`precision_tool` packages install the alias in the child when first imported and hand over to it
(`take_over`), with the parent's --shadow-real-npu-bridge choice. A real npu_bridge earlier on the
path is imported as usual.
"""

from __future__ import annotations

import importlib
import os
import sys

CHILD_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_path")
SHADOW_ENV = "NPU_SIM_CHILD_SHADOW"


def for_children(shadow: bool) -> dict:
    """Make this process's children import the alias (their environment is this process's); returns
    the variables as they were, for `restore`."""
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", SHADOW_ENV)}
    parts = [part for part in os.environ.get("PYTHONPATH", "").split(os.pathsep) if part and part != CHILD_PATH]
    os.environ["PYTHONPATH"] = os.pathsep.join(parts + [CHILD_PATH])
    os.environ[SHADOW_ENV] = "1" if shadow else "0"
    return saved


def restore(saved: dict) -> None:
    """Put back the variables `for_children` changed (an in-process caller of `npu-sim run` goes on)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def take_over(name: str) -> None:
    """In a child: replace the stub package `name` with the simulation's module of that name."""
    from npu_sim_bridge.runtime.alias import install_alias

    del sys.modules[name]
    # The stubs have done their work: off the path, so that only a real npu_bridge counts as one.
    sys.path[:] = [part for part in sys.path if os.path.abspath(part or os.curdir) != CHILD_PATH]
    install_alias(shadow=os.environ.get(SHADOW_ENV) == "1")
    sys.modules[name] = importlib.import_module(name)
