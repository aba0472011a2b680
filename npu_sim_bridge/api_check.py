"""What `npu-sim check` reports: each npu_bridge and TensorFlow 1.15 API a project uses, as `npu-sim run` has it.

The source is read with `ast`; of the script, only its import statements of TensorFlow, npu_bridge
and TensorFlow's companion packages run, each on its own, under the hooks `npu-sim run` installs
(api_resolve.py). Attribute chains on the names they bind are followed with getattr on the bound
objects. So an import check calls provided is one that ran, and check and run cannot disagree.
A script's own modules, and anything else it does, never run.
"""

import ast
import collections
import os

from npu_sim_bridge import api_resolve
from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.tf1compat import resolve
from npu_sim_bridge.tf1compat.hook import tf1_api


class CheckError(NpuSimError):
    """A path given to `npu-sim check` does not exist or holds no Python file."""


Use = collections.namedtuple("Use", ["api", "status", "note", "file", "line"])


# ---------------------------------------------------------------------------------------------------
# Reading the source

class _Scanner:
    """Runs a module's imports as they come (api_resolve.FileResolver) and records every API use, in source order.

    The tree is walked with an explicit stack, not ast.NodeVisitor's recursion: a long expression (thousands of
    `+` terms) is as deep as it is long and would pass Python's recursion limit. Each visit_* returns what to
    walk next, in order: child nodes, or a callable that runs once those before it are walked."""

    def __init__(self, filename):
        self.filename = filename
        self.resolver = api_resolve.FileResolver(filename)
        self.uses = []

    def visit(self, tree):
        stack = [tree]
        while stack:
            item = stack.pop()
            if not isinstance(item, ast.AST):
                item()
                continue
            handler = getattr(self, f"visit_{type(item).__name__}", None)
            following = handler(item) if handler is not None else list(ast.iter_child_nodes(item))
            stack.extend(reversed(following))

    def _record(self, result, node):
        self.uses.append(Use(result.api, result.status, result.note, self.filename, node.lineno))

    def visit_Import(self, node):  # pylint: disable=invalid-name
        for result in self.resolver.run_import(node):
            self._record(result, node)
        return []

    visit_ImportFrom = visit_Import  # pylint: disable=invalid-name

    def visit_Assign(self, node):  # pylint: disable=invalid-name
        """`slim = tf.contrib.slim`, `tf = tf.compat.v1`: the new name is bound to what that chain gives."""
        def bind():
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.resolver.assign(node.targets[0].id, node.value)
        return [*ast.iter_child_nodes(node), bind]

    def visit_Call(self, node):  # pylint: disable=invalid-name
        """A call of a chain: recorded as the chain is, except that calling a stand-in that fails is missing."""
        result = self.resolver.use(node.func, called=True)
        if result is None:
            return list(ast.iter_child_nodes(node))
        self._record(result, node.func)
        return [*node.args, *node.keywords]

    def visit_Attribute(self, node):  # pylint: disable=invalid-name
        result = self.resolver.use(node)
        if result is not None:
            self._record(result, node)
            return []  # the inner attributes are prefixes of this chain
        return list(ast.iter_child_nodes(node))


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
    """(uses, unreadable, files): every API use in the files of `paths` with its status, {file: why} for files
    that do not parse, and how many files were read. Run inside api_resolve.check_session()."""
    uses, unreadable = [], {}
    files = python_files(paths)
    for filename in files:
        try:
            with open(filename, "rb") as handle:
                tree = ast.parse(handle.read(), filename=filename)
        except (SyntaxError, ValueError, OSError) as error:
            unreadable[filename] = f"{type(error).__name__}: {error}"
            continue
        except (RecursionError, MemoryError):  # the parser's own nesting limit, not the file's fault as Python
            unreadable[filename] = ("too deeply nested for Python's parser (an expression or block nested "
                                    "thousands deep); split the expression to check this file")
            continue
        scanner = _Scanner(filename)
        with tf1_api(filename, v1_behavior=False):  # the imports run as the file's own code under run's hook;
            # only names are resolved, so the process keeps TensorFlow 2 behaviour (a library caller's may)
            scanner.visit(tree)
        uses.extend(scanner.uses)
    return uses, unreadable, len(files)


# ---------------------------------------------------------------------------------------------------
# The report

def check(paths):
    """{"apis": [{api, status, note, locations}], "summary": {...}, "unreadable": {file: why}} for `paths`."""
    with api_resolve.check_session():
        uses, unreadable, files = scan(paths)
    by_api = collections.OrderedDict()  # one entry per API and outcome (`import a.b.c` may fail where `from a.b
    for use in sorted(uses, key=lambda u: (u.file, u.line)):  # import c` runs)
        key = (use.api, use.status, use.note)
        entry = by_api.get(key)
        if entry is None:
            entry = by_api[key] = {"api": use.api, "status": use.status, "note": use.note, "locations": []}
        location = f"{use.file}:{use.line}"
        if location not in entry["locations"]:
            entry["locations"].append(location)
    apis = list(by_api.values())
    counts = collections.Counter(entry["status"] for entry in apis)
    summary = {"files": files, "uses": len(uses), "apis": len(apis),
               **{status: counts.get(status, 0) for status in resolve.STATUSES}}
    return {"apis": apis, "summary": summary, "unreadable": unreadable}
