"""GraphDef helpers shared by every pass: tensor names, an indexed view, validation and ordering, and the
names of the attributes the package writes (attr_names.py).

The names below are imported on first use, so that a module that needs only attr_names (the logging set-up
that runs at `import npu_sim_bridge`) does not import TensorFlow through the view.
"""

import importlib

_EXPORTS = {
    "TensorRef": "names",
    "parse_input": "names",
    "format_input": "names",
    "is_control_input": "names",
    "GraphView": "view",
    "validate_graph": "validate",
    "topological_order": "validate",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
