"""Local writes at execution time: temporary files and their commit (docs/design.md 6 and 9).

Writes go to a temporary name created with ``O_EXCL|O_NOFOLLOW`` in the destination
folder (opened by descriptor walk, `placet.local.walk`), are fsynced, then renamed
into place with directory descriptors: without overwrite by a no-replace rename
(``renameat2(RENAME_NOREPLACE)``, or ``link`` + ``unlink`` where that is missing), so an
existing name, including one that folds together on a case-insensitive disk, is never
clobbered; with overwrite, the old file is first linked (or copied) into the trash
folder of the data directory, then atomically replaced, so it is recoverable and the name
never goes missing. Every function closes the descriptors it opened if it fails.

Errors: those of `placet.local.walk`; `AlreadyExists`; `PathRefused`
(``symlink_refused``, ``not_regular_file``) for a target to replace; `PlacetError`
(``unsupported_filesystem``). Other ``OSError`` (EIO, ENOSPC...) propagate unchanged for
the caller to report as a failed op. Stdlib only; POSIX only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import secrets
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from placet.errors import AlreadyExists, PathRefused, PlacetError, UsageError
from placet.local.hashing import CHUNK
from placet.local.walk import (
    DIR_FLAGS,
    READ_FLAGS,
    check_component,
    close_quietly,
    lstat_at,
    not_regular_refusal,
)
from placet.names import TEMP_PREFIX, is_placet_temp
from placet.text import quote

__all__ = [
    "commit_temp_file",
    "create_temp_file",
    "discard_temp_file",
    "is_temp_name",
    "temp_name_for",
]


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_RENAME_NOREPLACE = 1
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}


def temp_name_for(final_name: str) -> str:
    """A fresh temporary name for `final_name`: ``.placet-tmp-<random>-<final_name[:40]>``."""
    return f"{TEMP_PREFIX}{secrets.token_hex(8)}-{final_name[:40]}"


def is_temp_name(name: str) -> bool:
    """True for a name of the shape `temp_name_for` makes (indexers skip these; an owner's
    name that merely starts with the prefix is not one: `placet.names`)."""
    return is_placet_temp(name)


def create_temp_file(dir_fd: int, final_name: str) -> tuple[int, str]:
    """Create a new, empty temporary file for `final_name` in `dir_fd`.

    Flags ``O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC``, mode 0o600: it is always a
    new inode placet created, never an existing file or a link's target.

    Returns:
        (write descriptor, temporary name); the caller closes the descriptor and commits
        with `commit_temp_file` or removes it with `discard_temp_file`.
    """
    check_component(final_name, final_name)
    for _ in range(8):
        temp = temp_name_for(final_name)
        try:
            return os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=dir_fd), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not find a free temporary name", final_name)


def discard_temp_file(dir_fd: int, temp_name: str) -> None:
    """Remove a temporary file if it is still there; never raises for a missing one."""
    if not is_temp_name(temp_name):
        raise UsageError(f"refusing to discard {quote(temp_name)}: not a placet temporary name")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp_name, dir_fd=dir_fd)


@functools.cache
def _libc_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None  # not glibc >= 2.28 (or not Linux): fall back to link + unlink
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return cast("Callable[[int, bytes, int, bytes, int], int]", fn)


def _exists_error(final_name: str) -> AlreadyExists:
    return AlreadyExists(
        f"refusing to write local file {quote(final_name)}: it already exists; placet never "
        "overwrites unless the proposal asked for overwrite (and the root's policy allows)",
        details={"name": final_name},
    )


def _rename_noreplace(dir_fd: int, src: str, dst: str) -> bool:
    """renameat2(RENAME_NOREPLACE); False when the kernel or filesystem lacks it."""
    fn = _libc_renameat2()
    if fn is None:
        return False
    rc = fn(dir_fd, os.fsencode(src), dir_fd, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise _exists_error(dst)
    if err in {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}:
        return False
    raise OSError(err, os.strerror(err), dst)


def _link_noreplace(dir_fd: int, src: str, dst: str) -> None:
    """link + unlink: fails with EEXIST atomically, portable POSIX."""
    try:
        os.link(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError as e:
        raise _exists_error(dst) from e
    except OSError as e:
        if e.errno in _NO_HARD_LINKS:
            raise PlacetError(
                f"cannot place {quote(dst)} without risking an overwrite: this filesystem "
                "supports neither no-replace rename nor hard links; download to a folder "
                "on another filesystem",
                code="unsupported_filesystem",
                details={"name": dst},
            ) from e
        raise
    os.unlink(src, dir_fd=dir_fd)


def _trash_name(final_name: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    tail = os.fsdecode(os.fsencode(final_name)[:200])
    return f"{stamp}-{secrets.token_hex(4)}-{tail}"


def _copy_fd(src: int, dst: int) -> None:
    while True:
        block = os.read(src, CHUNK)
        if not block:
            return
        view = memoryview(block)
        while view:
            view = view[os.write(dst, view) :]


def _preserve_existing(dir_fd: int, final_name: str, trash_dir: Path) -> Path | None:
    """Keep the current `final_name` (if any) recoverable in `trash_dir`; its new path."""
    st = lstat_at(dir_fd, final_name)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise PathRefused(
            f"refusing to replace {quote(final_name)}: it is a symbolic link; remove it first",
            code="symlink_refused",
            details={"name": final_name},
        )
    if not stat.S_ISREG(st.st_mode):
        raise not_regular_refusal(final_name, "not a regular file")
    trash_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    trash_fd = os.open(trash_dir, DIR_FLAGS)
    try:
        name = _trash_name(final_name)
        try:
            os.link(final_name, name, src_dir_fd=dir_fd, dst_dir_fd=trash_fd, follow_symlinks=False)
        except OSError as e:
            if e.errno not in _NO_HARD_LINKS:
                raise
            # Another filesystem: copy the bytes; the replace below then drops the old inode.
            src = os.open(final_name, READ_FLAGS, dir_fd=dir_fd)
            try:
                fcntl.fcntl(src, fcntl.F_SETFL, fcntl.fcntl(src, fcntl.F_GETFL) & ~os.O_NONBLOCK)
                dst = os.open(name, _TEMP_FLAGS, 0o600, dir_fd=trash_fd)
                try:
                    _copy_fd(src, dst)
                    os.fsync(dst)
                finally:
                    close_quietly(dst)
            finally:
                close_quietly(src)
        os.fsync(trash_fd)
    finally:
        close_quietly(trash_fd)
    return trash_dir / name


def commit_temp_file(
    dir_fd: int,
    temp_name: str,
    final_name: str,
    *,
    overwrite: bool,
    trash_dir: Path | None,
    fd: int | None = None,
) -> Path | None:
    """Move a finished temporary file onto its final name in the same folder, durably.

    Fsyncs the file (`fd` if given, else the temp reopened by name under `dir_fd`), then:
    without `overwrite`, a no-replace rename (``renameat2``; ``link``+``unlink`` where the
    kernel or filesystem lacks it); with `overwrite`, the existing target is first kept in
    `trash_dir` under a unique name (hard link, or a copy across filesystems), then
    ``os.replace`` with directory descriptors. Finally fsyncs the folder. On any failure
    the temporary file is removed.

    Returns:
        The trash path of the replaced file, or None when nothing was replaced.

    Raises:
        AlreadyExists: the target exists and `overwrite` is False.
        PathRefused: with `overwrite`, the target is a symlink or not a regular file.
        UsageError: `overwrite` without a `trash_dir`.
    """
    if overwrite and trash_dir is None:
        raise UsageError("commit_temp_file: overwrite=True needs a trash_dir")
    check_component(final_name, final_name)
    trashed: Path | None = None
    try:
        if fd is not None:
            os.fsync(fd)
        else:
            tfd = os.open(temp_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                os.fsync(tfd)
            finally:
                close_quietly(tfd)
        if overwrite:
            assert trash_dir is not None
            trashed = _preserve_existing(dir_fd, final_name, trash_dir)
            os.replace(temp_name, final_name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        elif not _rename_noreplace(dir_fd, temp_name, final_name):
            _link_noreplace(dir_fd, temp_name, final_name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)
    return trashed
