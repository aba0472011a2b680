"""Builds the C++ NpuOptimizer shim, the name index and the NPU op library against the installed TensorFlow
(loader.py loads them).

Each shared library is compiled once per (TensorFlow version, source, flags) into a private
per-user cache directory (0700, owned by the user). The shim is loaded with `tf.load_library`, which
registers `NpuOptimizer` with Grappler's CustomGraphOptimizerRegistry; the op library (npu_ops.cc:
the adapter's Gelu and FastGelu ops and their gradients) with `tf.load_op_library`, on first use,
which also gives their Python wrappers; the GeOp kernel (geop.cc: NpuSimGeOp, which runs a GeOp's
body as one single-device function) the same way, when the partition pass first emits one.

Cache location: $NPU_SIM_CACHE_DIR, else $XDG_CACHE_HOME/npu_sim_bridge, else ~/.cache/npu_sim_bridge.

Next to the library a record (`<library>.record`, JSON: size and SHA-256) is written when it is
built. The library is loaded only when it matches the record: a truncated file (which the
dynamic loader would map and crash on with SIGBUS) or a foreign one is rebuilt, with a warning
saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile

from npu_sim_bridge.errors import NativeBuildError

_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(_HERE, "npu_optimizer.cc")
LIBRARY_NAME = "libnpu_sim_optimizer.so"
OPS_SOURCE = os.path.join(_HERE, "npu_ops.cc")
OPS_LIBRARY_NAME = "libnpu_sim_ops.so"
INDEX_SOURCE = os.path.join(_HERE, "name_index.cc")
INDEX_LIBRARY_NAME = "libnpu_sim_name_index.so"
GEOP_SOURCE = os.path.join(_HERE, "geop.cc")
GEOP_LIBRARY_NAME = "libnpu_sim_geop.so"
RECORD_SUFFIX = ".record"

logger = logging.getLogger("npu_sim_bridge")


def cache_root() -> str:
    explicit = os.environ.get("NPU_SIM_CACHE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "npu_sim_bridge")


def _compiler() -> str:
    name = os.environ.get("CXX", "g++")
    found = shutil.which(name)
    if not found:
        raise NativeBuildError(
            f"no C++ compiler found (looked for {name!r}): NpuOptimizer is built against your "
            "TensorFlow on first import. Install one (Debian/Ubuntu: apt-get install g++) or set "
            "CXX to a compiler's path.")
    return found


def _build_flags() -> tuple[list[str], list[str]]:
    import tensorflow as tf

    include = tf.sysconfig.get_include()
    header = os.path.join(include, "tensorflow", "core", "grappler", "optimizers",
                          "custom_graph_optimizer_registry.h")
    if not os.path.exists(header):
        raise NativeBuildError(
            f"TensorFlow's C++ headers are missing ({header} does not exist): install the "
            "TensorFlow wheel from PyPI (pip install 'tensorflow-cpu==2.15.*'), which ships them.")
    python_include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(python_include, "Python.h")):
        raise NativeBuildError(
            f"Python's C headers are missing ({python_include}/Python.h): install them "
            f"(Debian/Ubuntu: apt-get install python{sys.version_info.major}."
            f"{sys.version_info.minor}-dev).")
    compile_flags = list(tf.sysconfig.get_compile_flags()) + [f"-I{python_include}"]
    link_flags = list(tf.sysconfig.get_link_flags())
    return compile_flags, link_flags


def shim_path(source: str = SOURCE, library: str = LIBRARY_NAME) -> str:
    """Where the library built from `source` for this TensorFlow lives in the cache (it may not exist yet)."""
    import tensorflow as tf

    compile_flags, link_flags = _build_flags()
    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        digest.update(handle.read())
    for part in [tf.__version__, sys.version, *compile_flags, *link_flags]:
        digest.update(part.encode())
    return os.path.join(cache_root(), "native", f"tf{tf.__version__}-{digest.hexdigest()[:16]}", library)


def _ensure_private_dir(path: str) -> None:
    """Create `path` (under the cache root) as 0700; refuse directories other users can write.

    Each missing level is created 0700 whatever the umask (os.makedirs would give the parents the
    umask's mode, e.g. group-writable under umask 002, and the check below would then refuse them).
    """
    root = cache_root()
    missing = []
    probe = path
    while not os.path.isdir(probe):
        if os.path.lexists(probe):
            raise NativeBuildError(
                f"the shim cache path {probe} exists but is not a directory; remove it or set NPU_SIM_CACHE_DIR "
                "to a directory of your own")
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
            os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask; make it exactly private
        except FileExistsError:
            pass  # created meanwhile by a concurrent first import
        except OSError as err:
            raise NativeBuildError(
                f"cannot create the shim cache directory {directory} ({err.strerror}); set NPU_SIM_CACHE_DIR "
                "(or XDG_CACHE_HOME) to a directory you can write, or NPU_SIM_SKIP_NATIVE=1 to use only the "
                "offline API and CLI") from None
    probe = path
    while True:
        info = os.stat(probe)
        if info.st_uid != os.getuid():
            raise NativeBuildError(
                f"the shim cache directory {probe} belongs to another user; remove it or set "
                "NPU_SIM_CACHE_DIR to a directory of your own")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise NativeBuildError(
                f"the shim cache directory {probe} is writable by other users, so a library "
                f"loaded from it cannot be trusted; run `chmod go-w {probe}` or set "
                "NPU_SIM_CACHE_DIR to a private directory")
        if probe == root or os.path.dirname(probe) == probe:
            break
        probe = os.path.dirname(probe)
    if not os.access(path, os.W_OK | os.X_OK):
        raise NativeBuildError(
            f"the shim cache directory {path} is not writable; run `chmod u+rwx {path}` or set "
            "NPU_SIM_CACHE_DIR to a directory you can write")


def _file_record(path: str) -> dict:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"size": size, "sha256": digest.hexdigest()}


def verify(path: str) -> str | None:
    """Why the cached library at `path` must not be loaded (missing, no record, size or hash differ), or None."""
    if not os.path.exists(path):
        return "it is not built yet"
    try:
        with open(path + RECORD_SUFFIX, encoding="utf-8") as handle:
            expected = json.load(handle)
        expected = {"size": int(expected["size"]), "sha256": str(expected["sha256"])}
    except (OSError, ValueError, KeyError, TypeError):
        return f"its build record {path + RECORD_SUFFIX} is missing or unreadable"
    actual = _file_record(path)
    if actual["size"] != expected["size"]:
        return f"it has {actual['size']} bytes where its build wrote {expected['size']} (truncated or replaced)"
    if actual["sha256"] != expected["sha256"]:
        return "its SHA-256 differs from the one its build recorded (the file was replaced or corrupted)"
    return None


@contextlib.contextmanager
def _build_lock(directory: str):
    with open(os.path.join(directory, ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(force: bool = False, source: str = SOURCE, library: str = LIBRARY_NAME) -> str:
    """Compile `source` (default: the shim) if the cache does not hold it yet; returns the library's path."""
    target = shim_path(source, library)
    directory = os.path.dirname(target)
    _ensure_private_dir(directory)
    with _build_lock(directory):
        problem = None if force else verify(target)
        if not force and problem is None:
            return target
        if problem is not None and os.path.exists(target):
            logger.warning("npu_sim_bridge: rebuilding the native library %s: %s", target, problem)
        compiler = _compiler()
        compile_flags, link_flags = _build_flags()
        what = {SOURCE: "the NpuOptimizer shim", INDEX_SOURCE: "the name index", GEOP_SOURCE: "the GeOp kernel"}.get(
            source, f"the NPU op library ({os.path.basename(source)})")
        # The compiler's CPU time, measured by benchmarks/bench_native_build.py (wall time grows with load).
        seconds = {SOURCE: 15, INDEX_SOURCE: 1, GEOP_SOURCE: 17}.get(source, 11)
        print(f"npu_sim_bridge: compiling {what} into {directory} (once per TensorFlow version, about {seconds} s "
              "on an idle core)", file=sys.stderr, flush=True)
        fd, partial = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=directory)
        os.close(fd)
        command = [compiler, "-shared", "-fPIC", "-O2", *compile_flags, source, "-o", partial,
                   *link_flags]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            os.unlink(partial)
            raise NativeBuildError(
                f"building {os.path.basename(source)} failed:\n  " + " ".join(command) + "\n"
                + completed.stderr[-4000:])
        os.chmod(partial, 0o600)
        record = _file_record(partial)
        with open(partial + RECORD_SUFFIX, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(partial, target)
        os.replace(partial + RECORD_SUFFIX, target + RECORD_SUFFIX)
    return target


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Build the NpuOptimizer shim, the name index and the NPU op library into the cache.")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = parser.parse_args(argv)
    print(build(force=args.force))
    print(build(force=args.force, source=INDEX_SOURCE, library=INDEX_LIBRARY_NAME))
    print(build(force=args.force, source=OPS_SOURCE, library=OPS_LIBRARY_NAME))
    print(build(force=args.force, source=GEOP_SOURCE, library=GEOP_LIBRARY_NAME))
    return 0


if __name__ == "__main__":
    sys.exit(main())
