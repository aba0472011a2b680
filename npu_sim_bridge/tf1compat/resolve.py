"""What `npu-sim run` gives a TF 1.15 script for one statement or path: found by running it, as the script would.

execute_import() runs one import statement (compiled from its AST node, nothing else of the script)
as the script's own code, in a scratch namespace, through whatever import hooks are on: under
`tf1_api(script)` that is the very hook `npu-sim run` uses. walk() follows an attribute chain with
getattr on the objects a statement bound, as the script's `tf.contrib.slim.conv2d` does. describe()
then classes what was found: provided, provided with a difference (which), accepted without effect,
or missing (with the message the script would get). Walking stops at the first value that is
neither a module nor a class (an object's attributes, e.g. user flags on tf.flags.FLAGS, are the
program's own).
"""

import ast
import builtins
import contextlib
import io
import types
import warnings

from npu_sim_bridge.graph.attr_names import VIEW_REAL_KEY, VIEW_ROOT_KEY
from npu_sim_bridge.tf1compat import contrib, internals, view
from npu_sim_bridge.tf1compat.python_view import PythonView

PROVIDED = "provided"
DIFFERENT = "provided with a difference"
NO_EFFECT = "accepted without effect"
MISSING = "missing"
STATUSES = (PROVIDED, DIFFERENT, NO_EFFECT, MISSING)


def canonical(path):
    """tensorflow.compat.v1.X and tensorflow_core.X -> tensorflow.X (the TF1 view is tf.compat.v1); others unchanged."""
    parts = path.split(".")
    if parts[0] == "tensorflow_core":
        parts[0] = "tensorflow"
    if parts[0] == "tensorflow" and parts[1:3] == ["compat", "v1"]:
        parts = parts[:1] + parts[3:]
    return ".".join(parts)


def error_text(error):
    """The first line of what a script that raised `error` would show (ImportError/AttributeError: their message)."""
    text = str(error) if isinstance(error, (ImportError, AttributeError)) else f"{type(error).__name__}: {error}"
    return text.split("\n")[0]


@contextlib.contextmanager
def quiet():
    """No warnings, and no output on sys.stdout/sys.stderr, from what an import runs (the report stays clean)."""
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        yield


def execute_import(node, filename):
    """Run the import statement `node` (ast.Import / ast.ImportFrom) as code of the script `filename` would, in a
    fresh namespace; returns that namespace, or raises what the script would get."""
    module = ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[]))
    namespace = {"__name__": "__main__", "__file__": filename, "__builtins__": builtins}
    with quiet():
        exec(compile(module, filename, "exec"), namespace)  # pylint: disable=exec-used  (one import statement)
    return namespace


def walk(value, attributes):
    """getattr along `attributes` from `value`, stopping at a value that is neither a module nor a class; raises
    what the script's attribute chain would raise."""
    with quiet():
        for attribute in attributes:
            if not isinstance(value, (types.ModuleType, type)):
                break
            value = getattr(value, attribute)
    return value


def _served_by(parts):
    """Notes for the TF 1.15 names along tensorflow.<parts> that internals.py supplies (the walk of the TF1 view)."""
    notes, current = [], view.tf1_module()
    with quiet():
        for index, part in enumerate(parts):
            if not isinstance(current, (types.ModuleType, type)):
                break
            if isinstance(current, PythonView):
                real = current.__dict__[VIEW_REAL_KEY]
                where = internals.where(real.__name__, part)
                if where and not hasattr(real, part):
                    notes.append(f"{'.'.join(['tensorflow', *parts[:index + 1]])} is served by {where}")
            try:
                current = getattr(current, part)
            except Exception:  # noqa: BLE001 - notes only: the status came from running the statement
                break
    return notes


def describe(path, value):
    """(status, note) for the TensorFlow path `path` (canonical) that resolved to `value` (None: not bound)."""
    parts = path.split(".")[1:]
    if parts[:1] == ["contrib"] and len(parts) >= 2:
        rest = ".".join(parts[1:])
        if rest in contrib.NO_EFFECT:
            return NO_EFFECT, contrib.NO_EFFECT[rest]
        if len(parts) == 2 and parts[1] in contrib.TF115_CONTRIB_MODULES and parts[1] not in contrib.mapped_modules():
            return NO_EFFECT, (f"tf.contrib.{parts[1]} imports, but TensorFlow 2 has no tf.contrib.{parts[1]}: "
                               "using any of its names fails")
        matches = [prefix for prefix in contrib.DIFFERENCES if rest == prefix or rest.startswith(prefix + ".")]
        if matches:
            prefix = max(matches, key=len)
            if contrib.DIFFERENCES[prefix] is not None:
                return DIFFERENT, f"tf.contrib.{prefix} {contrib.DIFFERENCES[prefix]}"
    unusable = marker(value, "__npu_sim_unusable__")
    if unusable:
        return NO_EFFECT, f"{path.partition('.')[2]} imports, but using it fails: {unusable}"
    no_effect = marker(value, "__npu_sim_no_effect__")
    if no_effect:
        return NO_EFFECT, no_effect
    return PROVIDED, "; ".join(_served_by(parts))


def marker(value, name):
    """The note a function or class carries as attribute `name` (other objects' attributes can run code), or None.

    __npu_sim_no_effect__: accepted, does nothing; __npu_sim_unusable__: imports, and fails when called."""
    note = getattr(value, name, None) if isinstance(value, (types.FunctionType, type)) else None
    return note if isinstance(note, str) else None


def resolve_tensorflow(path, is_import=False):
    """(status, note) for a `tensorflow...` path under `npu-sim run`'s TF1 hook: `from <parent> import <name>`
    when is_import, else the attribute chain on `import tensorflow as tf`."""
    from npu_sim_bridge.tf1compat import hook

    path = canonical(path)
    parent, _, name = path.rpartition(".")
    source = f"from {parent} import {name}" if is_import and parent else f"import {path.split('.')[0]} as {VIEW_ROOT_KEY}"
    was_on = hook.tf1_api_enabled()
    hook.enable_tf1_api(_RESOLVE_FILE, v1_behavior=False)  # names only: the process keeps its behaviour
    try:
        namespace = execute_import(ast.parse(source).body[0], _RESOLVE_FILE)
        value = namespace[name] if is_import and parent else walk(namespace[VIEW_ROOT_KEY], path.split(".")[1:])
    except Exception as error:  # noqa: BLE001 - what the script would get is reported, not raised
        return MISSING, error_text(error)
    finally:
        if not was_on:
            hook.disable_tf1_api()
    return describe(path, value)


_RESOLVE_FILE = "<npu-sim resolve>"  # the statements resolve_tensorflow runs count as a script's own code
