"""Packaging: one version source, the Python versions declared, the data files the package needs at run time."""

import os
import re
import tomllib

import npu_sim_bridge

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)


def _pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)


def test_the_version_is_written_once_in_the_package():
    project = _pyproject()
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "npu_sim_bridge.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", npu_sim_bridge.__version__)
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as handle:
        assert not re.search(r"version\s*=", handle.read())
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as handle:
        assert f"## {npu_sim_bridge.__version__}" in handle.read()


def test_declared_python_is_the_one_ci_runs():
    project = _pyproject()["project"]
    assert project["requires-python"] == ">=3.11,<3.12"
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]
    assert not any("3.9" in c or "3.10" in c for c in project["classifiers"])


def test_package_data_covers_the_files_read_at_run_time():
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    package = os.path.dirname(npu_sim_bridge.__file__)
    for folder, patterns in data.items():
        directory = os.path.join(package, *folder.split(".")[1:])
        for pattern in patterns:
            suffix = pattern.lstrip("*")
            assert any(name.endswith(suffix) for name in os.listdir(directory)), (folder, pattern)
    for folder, suffix in (("native", ".cc"), ("report", ".js"), ("report", ".html"), ("precision_tool", ".cfg")):
        shipped = data.get(f"npu_sim_bridge.{folder}", [])
        present = [name for name in os.listdir(os.path.join(package, folder)) if name.endswith(suffix)]
        assert not present or f"*{suffix}" in shipped, f"{folder}/*{suffix} is read at run time but not packaged"
    assert _pyproject()["project"]["scripts"] == {"npu-sim": "npu_sim_bridge.cli.main:main"}
    assert open(os.path.join(ROOT, "LICENSE")).read().count("Apache License") >= 1
