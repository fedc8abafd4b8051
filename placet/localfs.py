"""Local file I/O at execution time, by descriptor walk from the root (DESIGN.md 6 and 9).

`placet.paths.resolve_local` checks a path by name when a proposal is made; between that
check and the execution, anyone who can write in the root can swap a folder for a
symlink, and a by-name ``open`` would follow it out of the root (the check-then-open race
behind CVE-2025-53109). So at execution nothing is opened by a path string. The root is
opened once with ``O_DIRECTORY|O_NOFOLLOW`` and its device/inode compared with what the
proposal recorded; every further component is opened relative to the previous
descriptor with ``O_NOFOLLOW`` (``openat``), so a symlink anywhere is refused, not
followed. The descriptor placet opened is then the one handed to rclone (upload: as
stdin of ``rclone rcat``; download: as stdout of ``rclone cat``), because rclone would
reopen a path by name and undo the walk.

Reads refuse anything that is not a regular file *after* it was opened (``O_NONBLOCK``
so a FIFO cannot block the open, then ``fstat``), and files with more than one hard link
(a link to a file outside the root is invisible to any path check). Writes go to a
temporary name created with ``O_EXCL|O_NOFOLLOW`` in the destination folder, are fsynced,
then renamed into place with directory descriptors: without overwrite by a no-replace
rename (``renameat2(RENAME_NOREPLACE)``, or ``link`` + ``unlink`` where that is missing),
so an existing name, including one that folds together on a case-insensitive disk, is
never clobbered; with overwrite, the old file is first linked (or copied) into the trash
folder of the data directory, then atomically replaced, so it is recoverable and the name
never goes missing. Every function closes the descriptors it opened if it fails.

Errors: `PathRefused` with codes ``root_changed``, ``symlink_refused``,
``not_a_directory``, ``not_regular_file``, ``hard_link_refused``, ``path_invalid``,
``permission_denied``; `NotFound`; `AlreadyExists`. Other ``OSError`` (EIO, ENOSPC...)
propagate unchanged for the caller to report as a failed op. Stdlib only; POSIX only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import hashlib
import os
import secrets
import stat
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, cast

from placet.errors import (
    AlreadyExists,
    NotFound,
    PathRefused,
    PlacetError,
    StaleEvidence,
    UsageError,
)
from placet.paths import Root, check_local_shape
from placet.temp_names import is_placet_temp
from placet.text import inert

if TYPE_CHECKING:
    from placet.requests import RootRef

__all__ = [
    "TEMP_PREFIX",
    "commit_temp_file",
    "create_temp_file",
    "discard_temp_file",
    "hash_fd",
    "hash_fd_sized",
    "is_temp_name",
    "lstat_at",
    "open_dir_under",
    "open_file_for_read",
    "open_regular_at",
    "open_root",
    "sha256_fd",
    "temp_name_for",
]

TEMP_PREFIX = ".placet-tmp-"
"""Every temporary name placet creates, local or remote, starts with this."""

CHUNK = 1024 * 1024
_LOCKSTEP_CHUNKS = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_RENAME_NOREPLACE = 1
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}


def _q(path: str) -> str:
    return f"'{inert(path)}'"


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def open_root(root: Root | RootRef) -> int:
    """Open a root's directory and check it is the folder that was nominated.

    Returns:
        A directory descriptor (``O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC``); the caller closes it.

    Raises:
        PathRefused (code ``root_changed``): the directory is gone, is now a symlink, or
            its (st_dev, st_ino) differs from the recorded device/inode.
    """
    path = os.fspath(root.path)
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as e:
        raise _root_changed(root, e.strerror or "cannot be opened") from e
    try:
        st = os.fstat(fd)
    except BaseException:
        _close(fd)
        raise
    if (st.st_dev, st.st_ino) != (root.device, root.inode):
        _close(fd)
        raise _root_changed(root, "it was replaced by another folder")
    return fd


def _root_changed(root: Root | RootRef, why: str) -> PathRefused:
    return PathRefused(
        f"the local root {root.name}={_q(os.fspath(root.path))} is no longer the folder "
        f"the proposal was made against ({why}); nothing was read or written: check the "
        "folder and propose again",
        code="root_changed",
        details={"root": root.name, "path": os.fspath(root.path)},
    )


def _check_component(part: str, shown: str) -> None:
    if part in {"", ".", ".."} or "/" in part or "\x00" in part:
        raise PathRefused(
            f"refusing path {_q(shown)}: component {_q(part)} is not a single plain name; "
            "name the path from the root down",
            code="path_invalid",
            details={"path": shown},
        )


def _refusal_for(dir_fd: int, name: str, shown: str, e: OSError) -> PlacetError:
    """Turn an open failure on `name` under `dir_fd` into the domain error it means.

    An errno with no domain meaning (EIO, EMFILE...) is re-raised as is.
    """
    if e.errno in {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or stat.S_ISLNK(st.st_mode) or e.errno == errno.ELOOP:
            return PathRefused(
                f"refusing path {_q(shown)}: it is (or became) a symbolic link; placet "
                "never follows links in a root: name the real path",
                code="symlink_refused",
                details={"path": shown},
            )
        return PathRefused(
            f"refusing path {_q(shown)}: it is not a folder; check the path",
            code="not_a_directory",
            details={"path": shown},
        )
    if e.errno == errno.ENOENT:
        return NotFound(
            f"local path {_q(shown)} does not exist (it may have been moved since the "
            "proposal was made)",
            details={"path": shown},
        )
    if e.errno in {errno.EACCES, errno.EPERM}:
        return PathRefused(
            f"cannot open local path {_q(shown)}: permission denied; fix its permissions "
            "or choose another file",
            code="permission_denied",
            details={"path": shown},
        )
    if e.errno == errno.ENXIO:  # a unix socket
        return _not_regular(shown, "a socket")
    raise e


def _not_regular(shown: str, what: str) -> PathRefused:
    return PathRefused(
        f"refusing local path {_q(shown)}: it is {what}, not a regular file; name a regular file",
        code="not_regular_file",
        details={"path": shown},
    )


def open_dir_under(
    root_fd: int, rel_parts: Sequence[str] | PurePosixPath, create: bool = False
) -> int:
    """Open the folder `rel_parts` below `root_fd`, one component at a time, no links.

    Args:
        root_fd: an open directory descriptor (not closed here).
        rel_parts: the components (``()`` gives a duplicate of `root_fd`).
        create: make missing folders (mode 0o700, then the umask) on the way down.

    Returns:
        A new directory descriptor; the caller closes it.

    Raises:
        PathRefused: ``symlink_refused`` (a component is a symlink), ``not_a_directory``,
            ``path_invalid`` (``..``, ``/`` or NUL in a component), ``permission_denied``.
        NotFound: a component is missing and `create` is False.
    """
    parts = rel_parts.parts if isinstance(rel_parts, PurePosixPath) else tuple(rel_parts)
    current = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[: i + 1])
            _check_component(part, shown)
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=current)
            except FileNotFoundError as e:
                if not create:
                    raise _refusal_for(current, part, shown, e) from e
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=current)
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=current)
                except OSError as e2:
                    raise _refusal_for(current, part, shown, e2) from e2
            except OSError as e:
                raise _refusal_for(current, part, shown, e) from e
            _close(current)
            current = nxt
    except BaseException:
        _close(current)
        raise
    return current


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of `name` in `dir_fd`, or None if absent (never follows a link)."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_regular_at(
    dir_fd: int, name: str, *, shown: str | None = None
) -> tuple[int, os.stat_result]:
    """Open `name` in `dir_fd` for reading, refusing anything but a singly-linked file.

    Opens with ``O_RDONLY|O_NOFOLLOW|O_NONBLOCK`` (a FIFO cannot block), checks with
    ``fstat``, then clears ``O_NONBLOCK``.

    Returns:
        (descriptor, its ``os.stat_result``); the caller closes the descriptor.

    Raises:
        PathRefused: ``symlink_refused``, ``not_regular_file`` (folder, FIFO, socket,
            device), ``hard_link_refused`` (``st_nlink > 1``), ``permission_denied``.
        NotFound: no such name.
    """
    shown = name if shown is None else shown
    _check_component(name, shown)
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise _refusal_for(dir_fd, name, shown, e) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a folder"
                if stat.S_ISDIR(st.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "a device or socket"
            )
            raise _not_regular(shown, kind)
        if st.st_nlink > 1:
            raise PathRefused(
                f"refusing local path {_q(shown)}: it has {st.st_nlink} hard links, so its "
                "content may be shared with a file outside the root; copy it to a new file "
                "and name that",
                code="hard_link_refused",
                details={"path": shown, "nlink": st.st_nlink},
            )
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        _close(fd)
        raise
    return fd, st


def open_file_for_read(
    root: Root | RootRef, rel: str | PurePosixPath
) -> tuple[int, os.stat_result]:
    """Open the regular file `rel` under `root` by descriptor walk (the execution path).

    `rel` is checked by shape again (`placet.paths.check_local_shape`), the root is
    re-opened and its identity checked (`open_root`), folders are walked with
    `open_dir_under`, the file opened with `open_regular_at`.

    Returns:
        (descriptor positioned at 0, blocking, ``O_CLOEXEC``; its ``os.stat_result``).

    Raises:
        PathRefused: every code of `open_root`, `open_dir_under` and `open_regular_at`;
            ``not_regular_file`` for the root itself.
        NotFound: a component is missing.
    """
    shown = str(rel)
    parts = check_local_shape("" if shown == "." else shown).parts
    if not parts:
        raise _not_regular(shown or ".", "the root folder itself")
    root_fd = open_root(root)
    try:
        dir_fd = open_dir_under(root_fd, parts[:-1])
    finally:
        _close(root_fd)
    try:
        return open_regular_at(dir_fd, parts[-1], shown="/".join(parts))
    finally:
        _close(dir_fd)


def temp_name_for(final_name: str) -> str:
    """A fresh temporary name for `final_name`: ``.placet-tmp-<random>-<final_name[:40]>``."""
    return f"{TEMP_PREFIX}{secrets.token_hex(8)}-{final_name[:40]}"


def is_temp_name(name: str) -> bool:
    """True for a name of the shape `temp_name_for` makes (indexers skip these; an owner's
    name that merely starts with the prefix is not one: `placet.temp_names`)."""
    return is_placet_temp(name)


def create_temp_file(dir_fd: int, final_name: str) -> tuple[int, str]:
    """Create a new, empty temporary file for `final_name` in `dir_fd`.

    Flags ``O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC``, mode 0o600: it is always a
    new inode placet created, never an existing file or a link's target.

    Returns:
        (write descriptor, temporary name); the caller closes the descriptor and commits
        with `commit_temp_file` or removes it with `discard_temp_file`.
    """
    _check_component(final_name, final_name)
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
        raise UsageError(f"refusing to discard {_q(temp_name)}: not a placet temporary name")
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
        f"refusing to write local file {_q(final_name)}: it already exists; placet never "
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
                f"cannot place {_q(dst)} without risking an overwrite: this filesystem "
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
            f"refusing to replace {_q(final_name)}: it is a symbolic link; remove it first",
            code="symlink_refused",
            details={"name": final_name},
        )
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(final_name, "not a regular file")
    trash_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    trash_fd = os.open(trash_dir, _DIR_FLAGS)
    try:
        name = _trash_name(final_name)
        try:
            os.link(final_name, name, src_dir_fd=dir_fd, dst_dir_fd=trash_fd, follow_symlinks=False)
        except OSError as e:
            if e.errno not in _NO_HARD_LINKS:
                raise
            # Another filesystem: copy the bytes; the replace below then drops the old inode.
            src = os.open(final_name, _READ_FLAGS, dir_fd=dir_fd)
            try:
                fcntl.fcntl(src, fcntl.F_SETFL, fcntl.fcntl(src, fcntl.F_GETFL) & ~os.O_NONBLOCK)
                dst = os.open(name, _TEMP_FLAGS, 0o600, dir_fd=trash_fd)
                try:
                    _copy_fd(src, dst)
                    os.fsync(dst)
                finally:
                    _close(dst)
            finally:
                _close(src)
        os.fsync(trash_fd)
    finally:
        _close(trash_fd)
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
    _check_component(final_name, final_name)
    trashed: Path | None = None
    try:
        if fd is not None:
            os.fsync(fd)
        else:
            tfd = os.open(temp_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                os.fsync(tfd)
            finally:
                _close(tfd)
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


def _hash_pass(fd: int, hasher: Any, chunk: int, barrier: threading.Barrier | None) -> int:
    buf = bytearray(chunk)
    view = memoryview(buf)
    offset = 0
    chunks = 0
    while True:
        n = os.preadv(fd, [buf], offset)
        if n == 0:
            break
        hasher.update(view[:n])
        offset += n
        chunks += 1
        if barrier is not None and chunks % _LOCKSTEP_CHUNKS == 0:
            try:
                barrier.wait()  # keep passes within a few MiB, so they share the page cache
            except threading.BrokenBarrierError:
                barrier = None  # a partner finished or failed: go on alone
    if barrier is not None:
        barrier.abort()  # release partners waiting for this pass, which is done
    return offset


def hash_fd_sized(fd: int, types: Sequence[str], chunk: int = CHUNK) -> tuple[dict[str, str], int]:
    """Digest a regular file's bytes from offset 0 to EOF with one or more hashlib types.

    Reads with ``pread`` into a reused buffer (the file position is not moved). With
    several types, each is computed by its own thread over the same descriptor, the
    threads kept in lockstep every 32 chunks so the second read comes from the page cache:
    hashlib releases the GIL, so two types cost about as much as one on two cores (a
    single loop feeding both hashers costs the sum).

    Returns:
        ({type: lower-case hex}, size in bytes read).

    Raises:
        UsageError: a type hashlib does not offer (use rclone for those).
        StaleEvidence: the file's length changed while it was being hashed.
    """
    hashers: dict[str, Any] = {}
    for t in dict.fromkeys(types):
        try:
            hashers[t] = hashlib.new(t)
        except ValueError as e:
            raise UsageError(
                f"hash type {_q(t)} is not available in hashlib; compute it with rclone",
                details={"type": t},
            ) from e
    if len(hashers) == 1:
        size = _hash_pass(fd, next(iter(hashers.values())), chunk, None)
        return {t: h.hexdigest() for t, h in hashers.items()}, size
    barrier = threading.Barrier(len(hashers))
    sizes: dict[str, int] = {}
    errors: list[BaseException] = []

    def run(t: str) -> None:
        try:
            sizes[t] = _hash_pass(fd, hashers[t], chunk, barrier)
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in hashers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    if len(set(sizes.values())) != 1:
        raise StaleEvidence(
            "the file changed length while it was being hashed; try again when it is "
            "no longer being written",
            details={"sizes": sizes},
        )
    return {t: h.hexdigest() for t, h in hashers.items()}, next(iter(sizes.values()))


def hash_fd(fd: int, types: Sequence[str], chunk: int = CHUNK) -> dict[str, str]:
    """`hash_fd_sized` without the size: ``{type: hex}``."""
    return hash_fd_sized(fd, types, chunk)[0]


def sha256_fd(fd: int) -> tuple[str, int]:
    """SHA-256 hex and size in bytes of the file behind `fd` (from offset 0)."""
    digests, size = hash_fd_sized(fd, ["sha256"])
    return digests["sha256"], size
