"""Loading a repository script that is not part of the package (a benchmark, the docs' generator, an
example) as a module, so tests call its functions."""

import importlib.util
import pathlib
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_script(relative_path: str) -> ModuleType:
    """The module of the script at `relative_path` under the repository root, executed once per call."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
