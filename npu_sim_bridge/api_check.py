"""What `npu-sim check` reports: each npu_bridge and TensorFlow 1.15 API a project uses, as `npu-sim run` has it.

The source is read with `ast` (nothing is run): imports, and attribute chains on the names they
bind, give fully qualified paths with file:line. Each path is then resolved on the objects
`npu-sim run` would give the script: TensorFlow paths through the TF1 layer
(tf1compat.resolve), npu_bridge / hccl / precision_tool paths through the alias's MODULES table
and getattr on the simulated modules. So check and run cannot disagree.
"""

import ast
import collections
import importlib
import os
import types

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.runtime import alias
from npu_sim_bridge.tf1compat import resolve

_TF_ROOT = "tensorflow"
_ROOTS = (_TF_ROOT, *alias.ROOTS)


class CheckError(NpuSimError):
    """A path given to `npu-sim check` does not exist or holds no Python file."""


Use = collections.namedtuple("Use", ["path", "file", "line", "is_import"])


# ---------------------------------------------------------------------------------------------------
# Reading the source

def _root_of(dotted):
    return dotted.split(".")[0] in _ROOTS


class _Scanner(ast.NodeVisitor):
    """Collects the API paths a module uses (file-wide bindings: enough for how scripts name these modules)."""

    def __init__(self, filename):
        self.filename = filename
        self.bound = {}
        self.uses = []

    def _use(self, dotted, node, is_import=False):
        self.uses.append(Use(dotted, self.filename, node.lineno, is_import))

    def visit_Import(self, node):  # pylint: disable=invalid-name
        for name in node.names:
            if not _root_of(name.name):
                continue
            self._use(name.name, node, is_import=True)
            if name.asname:
                self.bound[name.asname] = name.name
            else:
                top = name.name.split(".")[0]
                self.bound[top] = top

    def visit_ImportFrom(self, node):  # pylint: disable=invalid-name
        if node.level or not node.module or not _root_of(node.module):
            return
        for name in node.names:
            if name.name == "*":
                self._use(node.module, node, is_import=True)
                if node.module == "npu_bridge.npu_init":
                    self.bound.setdefault("tf", _TF_ROOT)  # npu_init exports `tf` (TensorFlow 1.15's API)
                continue
            dotted = f"{node.module}.{name.name}"
            self._use(dotted, node, is_import=True)
            self.bound[name.asname or name.name] = dotted

    def _dotted(self, node):
        """The qualified path of a Name/Attribute chain on a bound name, else None."""
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.bound:
            return ".".join([self.bound[node.id], *reversed(chain)])
        return None

    def visit_Assign(self, node):  # pylint: disable=invalid-name
        """`slim = tf.contrib.slim`, `tf = tf.compat.v1`: the new name is bound to that path too."""
        self.generic_visit(node)
        dotted = self._dotted(node.value)
        if dotted is not None and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.bound[node.targets[0].id] = dotted

    def visit_Attribute(self, node):  # pylint: disable=invalid-name
        chain, base = [], node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.bound:
            self._use(".".join([self.bound[base.id], *reversed(chain)]), node)
            return  # the inner attributes are prefixes of this chain
        self.generic_visit(node)


def python_files(paths):
    """The .py files named, or under the folders named (sorted; hidden and virtualenv folders skipped)."""
    files = []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            for folder, subfolders, names in os.walk(path):
                subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in (
                    "__pycache__", "venv", "site-packages"))
                files.extend(os.path.join(folder, name) for name in sorted(names) if name.endswith(".py"))
        else:
            raise CheckError(f"{path!r} does not exist: give a Python file or a project folder")
    if not files:
        raise CheckError(f"no Python file in {', '.join(map(repr, paths))}")
    return files


def scan(paths):
    """(uses, unreadable, files): every API use in the files of `paths`, {file: why} for files that do not parse,
    and how many files were read."""
    uses, unreadable = [], {}
    files = python_files(paths)
    for filename in files:
        try:
            with open(filename, "rb") as handle:
                tree = ast.parse(handle.read(), filename=filename)
        except (SyntaxError, ValueError, OSError) as error:
            unreadable[filename] = f"{type(error).__name__}: {error}"
            continue
        scanner = _Scanner(filename)
        scanner.visit(tree)
        uses.extend(scanner.uses)
    return uses, unreadable, len(files)


# ---------------------------------------------------------------------------------------------------
# Resolving npu_bridge paths on the simulated modules

def _simulated(module_name):
    return [importlib.import_module(source) for source in alias.MODULES[module_name]]


def resolve_npu_bridge(path):
    """(status, note) for an npu_bridge / hccl / precision_tool path, as the alias serves it."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        module_name = ".".join(parts[:end])
        if module_name in alias.MODULES:
            break
        if module_name in alias.PACKAGES:
            if end == len(parts):
                return resolve.PROVIDED, ""
            child = ".".join(parts[:end + 1])
            return resolve.MISSING, (f"No module named {child!r}: npu_sim_bridge does not simulate it "
                                     f"(npu_bridge modules it simulates: see `npu-sim check --modules`)")
    else:
        return resolve.MISSING, f"No module named {path!r}: npu_sim_bridge does not simulate it"
    rest = parts[end:]
    if not rest:
        return resolve.PROVIDED, ""
    sources = _simulated(module_name)
    current = next((getattr(source, rest[0]) for source in sources if hasattr(source, rest[0])), None)
    if current is None:
        return resolve.MISSING, f"module {module_name!r} (simulated) has no attribute {rest[0]!r}"
    for part in rest[1:]:
        if not isinstance(current, (types.ModuleType, type)):
            break
        if not hasattr(current, part):
            return resolve.MISSING, f"{module_name}.{'.'.join(rest)}: no attribute {part!r}"
        current = getattr(current, part)
    if not isinstance(current, (types.FunctionType, type)):
        return resolve.PROVIDED, ""
    for marker, status in (("__npu_sim_no_effect__", resolve.NO_EFFECT), ("__npu_sim_difference__", resolve.DIFFERENT)):
        note = getattr(current, marker, None)
        if isinstance(note, str):
            return status, note
    summary = (current.__doc__ or "").strip().split("\n")[0]
    if summary.lower().startswith(("accepted, no effect", "accepted without effect")):
        return resolve.NO_EFFECT, summary  # the simulated function's own docstring says so
    return resolve.PROVIDED, ""


def classify(path, is_import):
    if path.split(".")[0] == _TF_ROOT:
        return resolve.resolve_tensorflow(path, is_import=is_import)
    return resolve_npu_bridge(path)


# ---------------------------------------------------------------------------------------------------
# The report

def check(paths):
    """{"apis": [{api, status, note, locations}], "summary": {...}, "unreadable": {file: why}} for `paths`."""
    from npu_sim_bridge.runtime.loss_scale import register_tf1_contrib

    register_tf1_contrib()  # as `npu-sim run` does (cli/run.py)
    uses, unreadable, files = scan(paths)
    by_api = collections.OrderedDict()
    for use in sorted(uses, key=lambda u: (u.file, u.line)):
        api = resolve.canonical(use.path) if use.path.startswith(_TF_ROOT + ".") else use.path
        entry = by_api.get(api)
        if entry is None:
            status, note = classify(api, use.is_import)
            entry = by_api[api] = {"api": api, "status": status, "note": note, "locations": []}
        location = f"{use.file}:{use.line}"
        if location not in entry["locations"]:
            entry["locations"].append(location)
    apis = list(by_api.values())
    counts = collections.Counter(entry["status"] for entry in apis)
    summary = {"files": files, "uses": len(uses), "apis": len(apis),
               **{status: counts.get(status, 0) for status in resolve.STATUSES}}
    return {"apis": apis, "summary": summary, "unreadable": unreadable}
