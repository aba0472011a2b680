"""Writing the files users keep (rewritten graphs, reports, manifests) so that a failure loses nothing.

Every write goes to a temporary file in the target's folder, is flushed to disk, and is renamed over
the target only when complete: a full disk or a killed process leaves the previous file intact and
no partial one. Failures are OutputError naming the file and the reason.
"""

from __future__ import annotations

import os
import tempfile

from npu_sim_bridge.errors import NpuSimError


class OutputError(NpuSimError, OSError):
    """A file could not be written where the user asked."""


def check_output_path(path: str, what: str) -> None:
    """Raise OutputError unless `path` can name a file to write: its folder exists, it is no folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"{what} {path!r} is a folder; give the path of a file inside it")
    if not os.path.isdir(folder):
        raise OutputError(f"{what} {path!r}: its folder {folder!r} does not exist; create it first or write "
                          "somewhere else")


def write_atomic(path: str, data: bytes | str, what: str = "output file") -> None:
    """Write `data` to `path` through a temporary file and a rename; the old file stays on any failure."""
    check_output_path(path, what)
    folder = os.path.dirname(os.path.abspath(path))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, partial = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
    except OSError as err:
        raise OutputError(f"cannot write {what} {path!r}: {err.strerror}; check the folder's permissions "
                          "and free space") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(path):
            os.chmod(partial, os.stat(path).st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(partial, 0o666 & ~umask)
        os.replace(partial, path)
    except OSError as err:
        try:
            os.unlink(partial)
        except OSError:
            pass
        kept = " (the previous file is unchanged)" if os.path.exists(path) else ""
        raise OutputError(f"cannot write {what} {path!r}: {err.strerror or err}{kept}; free some space or "
                          "write somewhere else") from None


def unique_base(directory: str, name: str) -> str:
    """`directory/name`, or `directory/name-2`, `-3`, ... : the first whose `.json` file no run wrote yet.

    The `.json` file is created empty to claim the name, so concurrent writers never pick the same one.
    """
    for number in range(1, 1_000_000):
        base = os.path.join(directory, name if number == 1 else f"{name}-{number}")
        try:
            fd = os.open(base + ".json", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return base
    raise OutputError(f"{directory!r} already holds a million reports named {name}; use a new folder")
