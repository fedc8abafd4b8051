"""Opening local files at execution time by descriptor walk from the root (docs/design.md 6, 9).

A path checked by name when proposed can have a folder swapped for a symlink before the
execution, and a by-name ``open`` would follow it out of the root (the check-then-open
race behind CVE-2025-53109). So nothing is opened by a path string here: the root is
opened with ``O_DIRECTORY|O_NOFOLLOW`` and its device/inode compared with the proposal's,
each component is opened relative to the last with ``O_NOFOLLOW``, and the descriptor is
what rclone gets (rclone would reopen a path by name). Reads refuse anything that is not a
regular file once opened (``O_NONBLOCK``, then ``fstat``) and files with more than one
hard link. Refusals are `PathRefused` (``root_changed``, ``symlink_refused``, ...) or
`NotFound`; other ``OSError`` propagate. Descriptors are closed on failure. Stdlib, POSIX."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from placet.errors import NotFound, PathRefused, PlacetError
from placet.paths.local import check_local_shape
from placet.paths.roots import Root
from placet.text import quote

if TYPE_CHECKING:
    from placet.schema import RootRef

__all__ = [
    "lstat_at",
    "open_dir_under",
    "open_file_for_read",
    "open_regular_at",
    "open_root",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def close_quietly(fd: int) -> None:
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
        fd = os.open(path, DIR_FLAGS)
    except OSError as e:
        raise _root_changed(root, e.strerror or "cannot be opened") from e
    try:
        st = os.fstat(fd)
    except BaseException:
        close_quietly(fd)
        raise
    if (st.st_dev, st.st_ino) != (root.device, root.inode):
        close_quietly(fd)
        raise _root_changed(root, "it was replaced by another folder")
    return fd


def _root_changed(root: Root | RootRef, why: str) -> PathRefused:
    return PathRefused(
        f"the local root {root.name}={quote(os.fspath(root.path))} is no longer the folder "
        f"the proposal was made against ({why}); nothing was read or written: check the "
        "folder and propose again",
        code="root_changed",
        details={"root": root.name, "path": os.fspath(root.path)},
    )


def check_component(part: str, shown: str) -> None:
    if part in {"", ".", ".."} or "/" in part or "\x00" in part:
        raise PathRefused(
            f"refusing path {quote(shown)}: component {quote(part)} is not a single plain name; "
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
                f"refusing path {quote(shown)}: it is (or became) a symbolic link; placet "
                "never follows links in a root: name the real path",
                code="symlink_refused",
                details={"path": shown},
            )
        return PathRefused(
            f"refusing path {quote(shown)}: it is not a folder; check the path",
            code="not_a_directory",
            details={"path": shown},
        )
    if e.errno == errno.ENOENT:
        return NotFound(
            f"local path {quote(shown)} does not exist (it may have been moved since the "
            "proposal was made)",
            details={"path": shown},
        )
    if e.errno in {errno.EACCES, errno.EPERM}:
        return PathRefused(
            f"cannot open local path {quote(shown)}: permission denied; fix its permissions "
            "or choose another file",
            code="permission_denied",
            details={"path": shown},
        )
    if e.errno == errno.ENXIO:  # a unix socket
        return not_regular_refusal(shown, "a socket")
    raise e


def not_regular_refusal(shown: str, what: str) -> PathRefused:
    return PathRefused(
        f"refusing local path {quote(shown)}: it is {what}, not a regular file; "
        "name a regular file",
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
            check_component(part, shown)
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=current)
            except FileNotFoundError as e:
                if not create:
                    raise _refusal_for(current, part, shown, e) from e
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=current)
                try:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=current)
                except OSError as e2:
                    raise _refusal_for(current, part, shown, e2) from e2
            except OSError as e:
                raise _refusal_for(current, part, shown, e) from e
            close_quietly(current)
            current = nxt
    except BaseException:
        close_quietly(current)
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
    check_component(name, shown)
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
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
            raise not_regular_refusal(shown, kind)
        if st.st_nlink > 1:
            raise PathRefused(
                f"refusing local path {quote(shown)}: it has {st.st_nlink} hard links, so its "
                "content may be shared with a file outside the root; copy it to a new file "
                "and name that",
                code="hard_link_refused",
                details={"path": shown, "nlink": st.st_nlink},
            )
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        close_quietly(fd)
        raise
    return fd, st


def open_file_for_read(
    root: Root | RootRef, rel: str | PurePosixPath
) -> tuple[int, os.stat_result]:
    """Open the regular file `rel` under `root` by descriptor walk (the execution path).

    `rel` is checked by shape again (`placet.paths.local.check_local_shape`), the root is
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
        raise not_regular_refusal(shown or ".", "the root folder itself")
    root_fd = open_root(root)
    try:
        dir_fd = open_dir_under(root_fd, parts[:-1])
    finally:
        close_quietly(root_fd)
    try:
        return open_regular_at(dir_fd, parts[-1], shown="/".join(parts))
    finally:
        close_quietly(dir_fd)
