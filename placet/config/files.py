"""Small files placet keeps beside its configuration and data (the pins, the host id),
written whole: a reader sees the old content, the new content, or no file, never a part.
Stdlib only; POSIX only."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_whole"]


def write_whole(path: Path, data: bytes, *, replace: bool) -> bool:
    """Write `data` to a 0600 temporary file beside `path`, fsync it, then put it under
    `path`: with `replace`, over whatever is there (`os.replace`); without, only if
    nothing is (`os.link`, which fails when another writer got there first). The folder
    is fsynced after. Returns False when `replace` is off and `path` already existed.
    The temporary file never outlives the call.

    Raises:
        OSError: the temporary file cannot be created, written or put in place.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
