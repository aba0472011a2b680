"""The native shim's build: per-user private cache, and clear errors when a tool is missing."""

import os
import stat

import pytest

from npu_sim_bridge.errors import NativeBuildError
from npu_sim_bridge.native import build, loader


def test_loaded_shim_lives_in_a_private_cache():
    path = loader.load_native()
    assert os.path.exists(path)
    directory = os.path.dirname(path)
    mode = os.stat(directory).st_mode
    assert not mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert os.stat(directory).st_uid == os.getuid()
    assert loader.load_native() == path  # loaded once per process


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_SIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(NativeBuildError, match="no C\\+\\+ compiler found.*apt-get install g\\+\\+"):
        build.build()


def test_other_user_writable_cache_is_refused(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    monkeypatch.setenv("NPU_SIM_CACHE_DIR", str(cache))
    with pytest.raises(NativeBuildError, match="writable by other users"):
        build.build()


def test_fresh_cache_builds_the_shim(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_SIM_CACHE_DIR", str(tmp_path / "fresh"))
    path = build.build()
    assert path.startswith(str(tmp_path / "fresh")) and os.path.getsize(path) > 0
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
