"""The documentation: the generated reference covers the code, the pages' code blocks run, their links resolve.

A fenced block marked `{.sh .no-run}` or `{.python .no-run}` is an illustration (it needs an NPU, a user's
script or a long run); every other `python` block is run as a script, and every other `sh` block's lines
must be `npu-sim ...` commands, which are run and must succeed.
"""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
FENCE = re.compile(r"^```(\{[^}]*\}|[\w+-]*)\s*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", os.path.join(DOCS, "gen_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def pages():
    """Every markdown file of the docs (the generated reference excluded) and the README."""
    found = [os.path.join(ROOT, "README.md")]
    for folder, subfolders, names in os.walk(DOCS):
        subfolders[:] = [name for name in subfolders if name != "reference"]
        found += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".md")]
    return found


def code_blocks(path):
    """[(language, runs, first line number, text)] of the fenced blocks of a markdown file."""
    blocks, current = [], None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if current is None:
                match = FENCE.match(line.strip()) if line.lstrip().startswith("```") else None
                if match:
                    info = match.group(1)
                    classes = re.findall(r"\.([\w-]+)", info) if info.startswith("{") else [info]
                    language = classes[0] if classes else ""
                    current = (language, "no-run" not in classes, number, line[:len(line) - len(line.lstrip())], [])
            elif line.strip() == "```":
                language, runs, start, indent, lines = current
                blocks.append((language, runs, start, "".join(text[len(indent):] for text in lines)))
                current = None
            else:
                current[4].append(line)
    assert current is None, f"{path}: a code block opened on line {current[2]} is never closed"
    return blocks


def runnable(language):
    return [(os.path.relpath(path, ROOT), start, text) for path in pages()
            for lang, runs, start, text in code_blocks(path) if runs and lang == language]


# ------------------------------------------------------------------------------------------ reference
def test_every_option_of_the_registry_has_a_reference_entry_with_its_effect():
    from npu_sim_bridge.config.registry import KEYS, REPLACED_KEYS

    page = GEN.options_page()
    for name, key in KEYS.items():
        row = next((line for line in page.splitlines() if f'<a id="{name}"></a>`{name}`' in line), None)
        assert row is not None, f"option {name} has no reference entry"
        assert key.doc.split(";")[0].strip() in row.replace("\\|", "|"), f"option {name}: its effect is missing"
    assert all(f"`{name}`" in page for name in REPLACED_KEYS)


def test_every_subcommand_and_its_options_have_a_reference_entry():
    page = GEN.cli_page()
    commands = GEN.subcommands()
    assert {"inspect", "run", "check", "bisect", "completion"} <= set(commands)
    for name, parser in commands.items():
        assert f'<a id="{name}"></a>`npu-sim {name}`' in page, f"subcommand {name} has no reference entry"
        section = page.split(f'<a id="{name}"></a>', 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:  # pylint: disable=protected-access
            for option in action.option_strings:
                if option not in ("-h", "--help") and action.help != "==SUPPRESS==":
                    assert f"`{option}" in section or f", {option}" in section, f"npu-sim {name} {option}"


def test_every_environment_variable_the_code_reads_is_described():
    from npu_sim_bridge.envvars import HONOURED

    page = GEN.environment_page()
    names = set(GEN.simulator_variables_in_source()) - {"NPU_SIM_"}
    assert "NPU_SIM_SKIP_NATIVE" in names and "NPU_SIM_CACHE_DIR" in names  # the scan finds the source's names
    for name in sorted(names | set(HONOURED)):
        row = next((line for line in page.splitlines() if f'<a id="{name}"></a>' in line), None)
        assert row is not None, f"{name} has no reference entry"
        assert len(row.split("|")[2].strip()) > 10, f"{name} has no description"


def test_the_generator_writes_the_three_pages(tmp_path):
    written = GEN.write_pages(str(tmp_path))
    assert sorted(os.path.basename(path) for path in written) == ["cli.md", "environment.md", "options.md"]
    assert all(os.path.getsize(path) > 1000 for path in written)


# ------------------------------------------------------------------------------------------ pages
def test_the_readme_is_short_and_every_page_is_in_the_site_navigation():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        assert len(handle.readlines()) <= 150
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as handle:
        nav = set(re.findall(r":\s*(\S+\.md)\s*$", handle.read(), re.M))
    on_disk = {os.path.relpath(path, DOCS) for path in pages()[1:]}
    assert on_disk | {f"reference/{name}" for name in GEN.PAGES} == nav


def _anchors(path, text):
    """The anchors a page offers: explicit ids and the headings' slugs (as MkDocs's toc makes them)."""
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for heading in re.findall(r"^#+\s+(.*)$", text, re.M):
        plain = re.sub(r"<[^>]+>", "", heading)
        slug = re.sub(r"[^\w\s-]", "", plain).strip().lower()
        found.add(re.sub(r"[-\s]+", "-", slug))
    return found


def test_links_between_pages_resolve(tmp_path):
    generated = {os.path.join(DOCS, "reference", os.path.basename(path)): path
                 for path in GEN.write_pages(str(tmp_path))}
    texts = {path: open(path, encoding="utf-8").read() for path in pages()}
    texts.update({path: open(source, encoding="utf-8").read() for path, source in generated.items()})
    checked = 0
    for path, text in texts.items():
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # an external address
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            assert resolved in texts or os.path.exists(resolved), f"{os.path.relpath(path, ROOT)}: {target}"
            if anchor and resolved in texts:
                assert anchor in _anchors(resolved, texts[resolved]), f"{os.path.relpath(path, ROOT)}: {target}"
            checked += 1
    assert checked > 20


RUNNER = """
import contextlib, io, json, shlex, sys, traceback
blocks, commands = json.loads(sys.argv[1])
failures = []
for where, text in blocks:  # each block as a script of its own: a fresh namespace
    try:
        exec(compile(text, where, "exec"), {"__name__": "__main__"})
    except BaseException:  # each block is reported, then the next one runs
        failures.append([where, traceback.format_exc(limit=-3)])
from npu_sim_bridge.cli.main import main
results = []
for line in commands:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            status = main(shlex.split(line)[1:])
        except SystemExit as end:  # --version and --help end as the console script does
            status = end.code or 0
    results.append([line, status, out.getvalue()])
print(json.dumps([failures, results]))
"""


def npu_sim_commands():
    commands = []
    for where, start, text in runnable("sh"):
        for line in text.splitlines():
            command = line.split("  #")[0].strip()
            if not command:
                continue
            assert command.startswith("npu-sim "), (
                f"{where}:{start}: `{command}` is not an npu-sim command; mark the block {{.sh .no-run}}")
            commands.append(command)
    return commands


@pytest.fixture(name="ran", scope="module")
def ran_fixture(tmp_path_factory):
    """The pages' python blocks, then their npu-sim commands, run in one child process (one TensorFlow start)."""
    import json

    blocks = [[f"{where}:{start}", text] for where, start, text in runnable("python")]
    commands = npu_sim_commands()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps([blocks, commands])],
                          cwd=str(tmp_path_factory.mktemp("blocks")), env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    failures, results = json.loads(done.stdout.splitlines()[-1])
    return blocks, failures, results


def test_the_pages_python_blocks_run(ran):
    blocks, failures, _ = ran
    assert len(blocks) >= 3
    assert not failures, "\n".join(f"{where}: {error}" for where, error in failures)


def test_the_pages_npu_sim_commands_run(ran):
    _, _, results = ran
    assert len(results) >= 4
    for command, status, out in results:
        assert status == 0 and out.strip(), f"`{command}` exited {status}"


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/troubleshooting.md"])
def test_the_newcomer_pages_name_only_subcommands_that_exist(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as handle:
        text = handle.read()
    named = set(re.findall(r"npu-sim ([a-z][a-z-]+)", text))
    assert named and named <= set(GEN.subcommands()), named - set(GEN.subcommands())
