"""The package's modules import each other without a cycle: at module level (what runs when a module is
imported, and the type-only imports under `if TYPE_CHECKING:`, which draw the same arrow for a reader), and
when the imports inside functions count too. In the TF1 layer the view of `tensorflow` sits on top and the
tables of TF 1.15 names at the bottom; the native loader sits above the builder; the CLI's subcommands share
their argument helpers from modules below main."""

import ast
import os

import npu_sim_bridge

PACKAGE = "npu_sim_bridge"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(npu_sim_bridge.__file__)))


def _modules(root):
    """{module name: (path, is a package)} of every .py file under the package."""
    found = {}
    for folder, _, files in os.walk(os.path.join(root, PACKAGE)):
        for name in files:
            if name.endswith(".py"):
                module = os.path.relpath(os.path.join(folder, name), root)[:-3].replace(os.sep, ".")
                is_package = module.endswith(".__init__")
                found[module[:-len(".__init__")] if is_package else module] = (os.path.join(folder, name), is_package)
    return found


def _top_level_imports(statements):
    """The import statements of a module body, outside functions and classes (inside if/try/with blocks too)."""
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif isinstance(statement, (ast.If, ast.Try, ast.With)):
            for block in (statement.body, getattr(statement, "orelse", []), getattr(statement, "finalbody", []),
                          *[handler.body for handler in getattr(statement, "handlers", [])]):
                yield from _top_level_imports(block)


def _all_imports(statements):
    """Every import statement of a module, those inside functions and classes too."""
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def import_graph(root=ROOT, function_level=False):
    """{module: set of package modules it imports at module level (with `function_level`, anywhere)}.
    `import a.b.c` also imports the packages a.b (their __init__), except the importer's own enclosing
    packages, which are importing already."""
    modules = _modules(root)
    graph = {module: set() for module in modules}

    def add(importer, target):
        graph[importer].add(target)
        parts = target.split(".")
        for end in range(2, len(parts)):
            parent = ".".join(parts[:end])
            if importer != parent and not importer.startswith(parent + "."):
                graph[importer].add(parent)

    for module, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        here = module if is_package else module.rpartition(".")[0]
        for statement in (_all_imports if function_level else _top_level_imports)(tree.body):
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.name in modules:
                        add(module, alias.name)
                continue
            if statement.level:
                parts = here.split(".")
                base = ".".join(parts[:len(parts) - statement.level + 1] + ([statement.module] if statement.module else []))
            else:
                base = statement.module
            for alias in statement.names:
                if f"{base}.{alias.name}" in modules:
                    add(module, f"{base}.{alias.name}")
                elif base in modules:
                    add(module, base)
        graph[module].discard(module)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_level_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    described = ["; ".join(f"{module} -> {', '.join(sorted(graph[module] & set(component)))}"
                           for module in component) for component in found]
    assert not found, "module-level import cycles:\n" + "\n".join(described)


def test_no_import_cycle_counting_imports_inside_functions():
    """Lazy imports (inside functions, to keep TensorFlow off a command's start) draw no cycle either: a module
    that reaches up to its caller for a helper is a layer out of place, wherever the import statement sits."""
    graph = import_graph(function_level=True)
    found = cycles(graph)
    described = ["; ".join(f"{module} -> {', '.join(sorted(graph[module] & set(component)))}"
                           for module in component) for component in found]
    assert not found, "import cycles (imports inside functions included):\n" + "\n".join(described)


def test_the_cycle_finder_finds_a_cycle_through_a_package_init():
    # a -> b.c (which runs b/__init__), b/__init__ -> a: a cycle, though no module names the other directly.
    graph = {"p.a": {"p.b.c", "p.b"}, "p.b": {"p.a"}, "p.b.c": set(), "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b"]]
    assert cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_the_graph_draws_module_level_and_type_only_imports_not_function_level_ones(tmp_path):
    files = {
        "__init__.py": "",
        "low.py": "def late():\n    from npu_sim_bridge import high\n",
        "high.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from npu_sim_bridge.sub import leaf\n",
        "sub/__init__.py": "from . import leaf\n",
        "sub/leaf.py": "from ..low import late\nimport npu_sim_bridge.high\n",
    }
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(str(tmp_path))
    assert graph["npu_sim_bridge.low"] == set()
    assert graph["npu_sim_bridge.high"] == {"npu_sim_bridge.sub.leaf", "npu_sim_bridge.sub"}
    assert graph["npu_sim_bridge.sub"] == {"npu_sim_bridge.sub.leaf"}
    assert graph["npu_sim_bridge.sub.leaf"] == {"npu_sim_bridge.low", "npu_sim_bridge.high"}
    assert cycles(graph) == [["npu_sim_bridge.high", "npu_sim_bridge.sub", "npu_sim_bridge.sub.leaf"]]
    everywhere = import_graph(str(tmp_path), function_level=True)
    assert everywhere["npu_sim_bridge.low"] == {"npu_sim_bridge.high"}  # the import inside late()
    assert cycles(everywhere) == [["npu_sim_bridge.high", "npu_sim_bridge.low", "npu_sim_bridge.sub",
                                   "npu_sim_bridge.sub.leaf"]]
