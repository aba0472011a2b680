"""What `npu-sim run` gives a TF 1.15 script for one `tensorflow...` path: resolved on the very objects it gets.

resolve_tensorflow("tensorflow.contrib.slim.conv2d") walks the TF1 view (view.py) attribute by
attribute, as the script's own attribute chain or import statement would, and classes the result:
provided, provided with a difference (which), accepted without effect, or missing (with the message
the script would get). Walking stops at the first value that is neither a module nor a class (an
object's attributes, e.g. user flags on tf.flags.FLAGS, are the program's own).
"""

import contextlib
import importlib
import io
import types
import warnings

from npu_sim_bridge.tf1compat import contrib, internals, view

PROVIDED = "provided"
DIFFERENT = "provided with a difference"
NO_EFFECT = "accepted without effect"
MISSING = "missing"
STATUSES = (PROVIDED, DIFFERENT, NO_EFFECT, MISSING)


def canonical(path):
    """tensorflow.compat.v1.X -> tensorflow.X (the TF1 view is tf.compat.v1); other paths unchanged."""
    parts = path.split(".")
    if parts[1:3] == ["compat", "v1"]:
        parts = parts[:1] + parts[3:]
    return ".".join(parts)


def _step(current, part):
    try:
        return getattr(current, part)
    except AttributeError:
        if isinstance(current, types.ModuleType) and hasattr(current, "__path__") \
                and not isinstance(current, (view.TF1Module, contrib.ContribModule)):
            return importlib.import_module(f"{current.__name__}.{part}")  # `from package import submodule`
        raise


def _note_for(value, parts):
    """(status, note) for a resolved value at tensorflow.<parts>."""
    if parts[:1] == ["contrib"] and len(parts) >= 2:
        rest = ".".join(parts[1:])
        if rest in contrib.NO_EFFECT:
            return NO_EFFECT, contrib.NO_EFFECT[rest]
        if isinstance(value, contrib.ContribModule) and parts[1] not in contrib.mapped_modules() \
                and len(parts) == 2:
            return NO_EFFECT, (f"tf.contrib.{parts[1]} imports, but TensorFlow 2 has no tf.contrib.{parts[1]}: "
                               "using any of its names fails")
        matches = [prefix for prefix in contrib.DIFFERENCES if rest == prefix or rest.startswith(prefix + ".")]
        if matches:
            prefix = max(matches, key=len)
            if contrib.DIFFERENCES[prefix] is not None:
                return DIFFERENT, f"tf.contrib.{prefix} {contrib.DIFFERENCES[prefix]}"
    # Only functions and classes are asked for the marker: other objects' attributes can run code (tf.flags.FLAGS).
    marker = getattr(value, "__npu_sim_no_effect__", None) if isinstance(value, (types.FunctionType, type)) else None
    if isinstance(marker, str):
        return NO_EFFECT, marker
    return PROVIDED, ""


def resolve_tensorflow(path, is_import=False):
    """(status, note) for a fully qualified `tensorflow...` path a TF1 script uses under `npu-sim run`."""
    parts = canonical(path).split(".")[1:]
    notes = []
    current = view.tf1_module()
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        for index, part in enumerate(parts):
            if not isinstance(current, (types.ModuleType, type)):
                break
            if isinstance(current, view.PythonView):
                real_name = current.__dict__["_npu_sim_real"].__name__
                where = internals.where(real_name, part)
                if where and not hasattr(current.__dict__["_npu_sim_real"], part):
                    notes.append(f"{'.'.join(['tensorflow', *parts[:index + 1]])} is served by {where}")
            try:
                current = _step(current, part)
            except (AttributeError, ImportError) as error:
                if is_import and _real_import_works(parts[:index + 1]):
                    return PROVIDED, ""
                return MISSING, str(error).split("\n")[0]
            except Exception as error:  # noqa: BLE001 - what the script would get is reported, not raised
                return MISSING, f"{type(error).__name__}: {error}".split("\n")[0]
        status, note = _note_for(current, parts)
    if status == PROVIDED and notes:
        note = "; ".join(notes)
    return status, note


def _real_import_works(parts):
    """The hook hands an import the view lacks to the real import system: does that import succeed?"""
    name = ".".join(["tensorflow", *parts])
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True
