"""How `npu-sim check` finds what `npu-sim run` gives one file's imports and attribute chains: by running them.

A FileResolver runs each import statement of the file on its own (tf1compat.resolve.execute_import),
under the same hooks `npu-sim run` installs (check_session): the TF1 hook for `tensorflow` and
`tensorflow_core`, the npu_bridge alias, and the install hint for TensorFlow's companion packages.
The objects a statement binds are remembered by name, and an attribute chain on such a name
(`tf.contrib.slim.conv2d`, `slim = tf.contrib.slim`) is followed with getattr on them. So an import
that check calls provided is one that ran, and an attribute chain is the script's own.
"""

import ast
import collections
import contextlib
import functools
import inspect
import os
import textwrap
import types

from npu_sim_bridge.runtime import alias
from npu_sim_bridge.tf1compat import packages, resolve

# Top-level packages whose imports check reports (a script's own modules are never run: only these are).
TENSORFLOW_ROOTS = ("tensorflow", "tensorflow_core")
ROOTS = (*TENSORFLOW_ROOTS, *alias.ROOTS, "tensorflow_estimator", "tensorflow_addons", *packages.PACKAGES)

Result = collections.namedtuple("Result", ["api", "status", "note"])
_Failed = collections.namedtuple("_Failed", ["note"])  # a name whose import or assignment failed


def is_root(dotted):
    return dotted.split(".")[0] in ROOTS


@contextlib.contextmanager
def check_session():
    """The hooks `npu-sim run` installs, for the whole check (its process is check's own)."""
    from npu_sim_bridge.runtime.loss_scale import register_tf1_contrib

    register_tf1_contrib()  # as `npu-sim run` does (cli/run.py)
    alias.install_alias(shadow=True)  # report the simulation even where a real npu_bridge is installed
    yield


def _api_name(dotted):
    return resolve.canonical(dotted) if dotted.split(".")[0] in TENSORFLOW_ROOTS else dotted


def describe(dotted, value):
    """(status, note) for `dotted` (a path check reports) that resolved to `value`."""
    api = _api_name(dotted)
    stub = not_simulated(value)
    if stub is not None:  # a call of it is missing (FileResolver.use); the import itself runs
        return resolve.NO_EFFECT, f"not simulated: it imports, but calling it raises NotImplementedError: {stub}"
    if api.split(".")[0] == "tensorflow":
        return resolve.describe(api, value)
    if not isinstance(value, (types.FunctionType, type)):
        return resolve.PROVIDED, ""
    for name, status in (("__npu_sim_no_effect__", resolve.NO_EFFECT), ("__npu_sim_difference__", resolve.DIFFERENT)):
        note = resolve.marker(value, name)
        if note:
            return status, note
    summary = (value.__doc__ or "").strip().split("\n")[0]
    if summary.lower().startswith(("accepted, no effect", "accepted without effect")):
        return resolve.NO_EFFECT, summary  # the simulated function's own docstring says so
    return resolve.PROVIDED, ""


def not_simulated(value):
    """The message of the NotImplementedError a module-level function only raises, read from its source (the
    function is never called), else None. The body, past its docstring, is one `raise NotImplementedError(...)`,
    or one call of a module function whose body is that raise (npu_plugin's RDMA helpers)."""
    if not isinstance(value, types.FunctionType) or "." in value.__qualname__:
        return None  # a method raising NotImplementedError is an abstract one, for subclasses to define
    return _stub_message(value)


def _body(function):
    """The statements of `function`'s definition past its docstring, or None when its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):  # built in, defined in a string, or source not shipped
        return None
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    definition = tree.body[0]
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return definition, body


@functools.lru_cache(maxsize=None)
def _stub_message(function):
    found = _body(function)
    if found is None or len(found[1]) != 1:
        return None
    statement = found[1][0]
    if isinstance(statement, ast.Raise):
        return _raised_message(statement, {})
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    helper = function.__globals__.get(call.func.id)
    if not isinstance(helper, types.FunctionType):
        return None
    inner = _body(helper)
    if inner is None or len(inner[1]) != 1 or not isinstance(inner[1][0], ast.Raise):
        return None
    parameters = [arg.arg for arg in inner[0].args.args]
    bound = {name: arg.value for name, arg in zip(parameters, call.args) if isinstance(arg, ast.Constant)}
    bound.update({kw.arg: kw.value.value for kw in call.keywords if isinstance(kw.value, ast.Constant)})
    return _raised_message(inner[1][0], bound)


def _raised_message(statement, bound):
    """The text of `raise NotImplementedError(...)` with the constants `bound` to names filled in, else None."""
    raised = statement.exc
    if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
        return ""
    if not (isinstance(raised, ast.Call) and isinstance(raised.func, ast.Name)
            and raised.func.id == "NotImplementedError"):
        return None
    return _text(raised.args[0], bound) if raised.args else ""


def _text(node, bound):
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(part, bound) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        if isinstance(node.value, ast.Name) and node.value.id in bound:
            return str(bound[node.value.id])
        return "{" + ast.unparse(node.value) + "}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, bound) + _text(node.right, bound)
    return "{" + ast.unparse(node) + "}"


class FileResolver:
    """The names one file's import statements bind, and what its API uses resolve to (in source order)."""

    def __init__(self, filename):
        self.filename = os.path.abspath(filename)
        self.bound = {}  # name -> (dotted path, value or _Failed)

    def run_import(self, node):
        """[Result] for an ast.Import / ast.ImportFrom of the reported packages, each name run on its own."""
        results = []
        if isinstance(node, ast.ImportFrom):
            if node.level or not node.module or not is_root(node.module):
                return results
            for name in node.names:
                one = ast.copy_location(ast.ImportFrom(module=node.module, names=[name], level=0), node)
                results.append(self._from_import(one, node.module, name))
        else:
            for name in node.names:
                if is_root(name.name):
                    results.append(self._import(ast.copy_location(ast.Import(names=[name]), node), name))
        return results

    def _run(self, node):
        try:
            return resolve.execute_import(node, self.filename), None
        except (Exception, SystemExit) as error:  # noqa: BLE001 - what the script would get is reported
            return None, resolve.error_text(error)

    def _missing(self, dotted, note):
        return Result(_api_name(dotted), resolve.MISSING, note)

    def _import(self, node, name):
        namespace, error = self._run(node)
        target = name.asname or name.name.split(".")[0]
        if error is not None:
            if name.asname:  # a failed `import a.b.c` binds nothing; `import a.b as x` leaves x unusable
                self.bound[name.asname] = (name.name, _Failed(error))
            return self._missing(name.name, error)
        if name.asname:
            value = namespace[name.asname]
            self.bound[name.asname] = (name.name, value)
        else:
            self.bound[target] = (target, namespace[target])
            try:
                value = resolve.walk(namespace[target], name.name.split(".")[1:])
            except Exception:  # noqa: BLE001 - the import ran; the chain is only for the notes
                value = None
        return Result(_api_name(name.name), *describe(name.name, value))

    def _from_import(self, node, module, name):
        namespace, error = self._run(node)
        dotted = module if name.name == "*" else f"{module}.{name.name}"
        if error is not None:
            if name.name != "*":
                self.bound[name.asname or name.name] = (dotted, _Failed(error))
            return self._missing(dotted, error)
        if name.name == "*":
            for key, value in namespace.items():  # modules of the reported packages it bound (npu_init's `tf`)
                if isinstance(value, types.ModuleType) and not key.startswith("__") and is_root(value.__name__):
                    self.bound[key] = (value.__name__, value)
            return Result(_api_name(dotted), *describe(dotted, None))
        value = namespace[name.asname or name.name]
        self.bound[name.asname or name.name] = (dotted, value)
        return Result(_api_name(dotted), *describe(dotted, value))

    def chain(self, node):
        """(dotted path, value or _Failed) of a Name/Attribute chain on a bound name, else None."""
        attributes = []
        while isinstance(node, ast.Attribute):
            attributes.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.bound:
            return None
        attributes.reverse()
        dotted, value = self.bound[node.id]
        dotted = ".".join([dotted, *attributes])
        if isinstance(value, _Failed):
            return dotted, _Failed(f"not imported: {value.note}")
        try:
            return dotted, resolve.walk(value, attributes)
        except Exception as error:  # noqa: BLE001 - what the script would get is reported, not raised
            return dotted, _Failed(resolve.error_text(error))

    def use(self, node, called=False):
        """The Result of an attribute chain on a bound name (or of a call of it, `called`), else None.

        A bare bound name counts only when called and unusable (a stand-in that raises when called)."""
        found = self.chain(node)
        if found is None:
            return None
        dotted, value = found
        if isinstance(value, _Failed):
            return self._missing(dotted, value.note) if isinstance(node, ast.Attribute) else None
        unusable = resolve.marker(value, "__npu_sim_unusable__")
        if called and unusable:
            return self._missing(dotted, unusable)  # what the script gets at this call
        stub = not_simulated(value) if called else None
        if stub is not None:
            return self._missing(dotted, f"not simulated: calling it raises NotImplementedError: {stub}")
        if not isinstance(node, ast.Attribute):
            return None
        return Result(_api_name(dotted), *describe(dotted, value))

    def assign(self, name, value_node):
        """`name = <chain on a bound name>`: `name` is bound to what the chain gives."""
        found = self.chain(value_node)
        if found is not None:
            self.bound[name] = found
