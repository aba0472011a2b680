"""The native NpuOptimizer shim: its C++ source, its build into a per-user cache, and its Python entry."""

# Imported on first use, so that `python -m npu_sim_bridge.native.build` finds build.py not yet imported by its
# package (runpy warns otherwise).
_LAZY = {"shim_path": "npu_sim_bridge.native.build", "load_native": "npu_sim_bridge.native.loader"}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = ["load_native", "shim_path"]
