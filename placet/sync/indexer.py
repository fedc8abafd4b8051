"""The local indexer: walk a folder under a root and list every entry in it.

The walk goes by directory descriptors from the root down (`O_NOFOLLOW|O_DIRECTORY`,
`os.scandir(fd)`), so nothing is followed: symlinks, FIFOs, sockets and devices are
listed `skipped` and never opened, and no name swapped mid-walk leads outside the root
(docs/design.md section 6). A file with several hard links is `skipped` too (transfers
refuse it). Depth is capped at `MAX_LOCAL_DEPTH`; unreadable files and folders become
`error` entries (the planner plans nothing beneath such a folder), as does a name that
is not valid UTF-8. Names are NFC-normalised for `path`; `raw_path` keeps the on-disk
name for I/O. Each regular file goes to `placet.sync.index_file`."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path

from placet.errors import NotFound, PathRefused
from placet.local.walk import DIR_FLAGS
from placet.paths.local import MAX_LOCAL_DEPTH
from placet.sync.cache import (
    DigestCache,
    OwnedRows,
)
from placet.sync.digests import normalise_types
from placet.sync.entries import LocalEntry, gc_paused, new_local_entry, nfc
from placet.sync.index_file import (
    IndexResult,
    Walk,
    add_entry,
    add_file,
    collect,
    error_entry,
    over_cap,
)
from placet.sync.model import DEFAULT_ENTRY_CAP

_NAME = attrgetter("name")
_S_IFMT, _S_IFREG = stat.S_IFMT(0o177777), stat.S_IFREG
_SPECIAL = (
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _walk_dir(w: Walk, fd: int, prefix: str, raw_prefix: str, depth: int) -> None:
    """List one open folder; recurse into subfolders (depth-first, names sorted).

    The loop is the index's hot path (100,000 turns for 100,000 files): a file whose
    cached digests still hold is appended right here, everything else goes through
    `add_file`, `_dir` and `add_entry`."""
    with os.scandir(fd) as it:
        items = sorted(it, key=_NAME)
    hidden = w.include_hidden
    pieces = w.pieces if depth == 0 else None
    subs: frozenset[str] = frozenset()
    if pieces is not None:
        # A cache too big to hold is read a top-level folder at a time: here the rows
        # outside these folders (this folder's own files, folders gone since), then each
        # folder's rows as the walk enters it (`placet.sync.cache.CachePieces`).
        subs = frozenset(
            d.name
            for d in items
            if (hidden or d.name[:1] != ".") and d.is_dir(follow_symlinks=False)
        )
        w.cached = pieces.rest([w.rel_prefix + n for n in subs])
    same = prefix == raw_prefix
    # Rows loaded for this walk alone are taken as they are read (freed as the entries
    # are built); a shared copy is only read.
    get = w.cached.pop if type(w.cached) is OwnedRows else w.cached.get
    rel_prefix = w.rel_prefix
    need, primary = w.need, w.primary
    entries = w.entries
    cap = w.entry_cap
    for d in items:
        name = d.name
        if not hidden and name[:1] == ".":
            continue
        raw = raw_prefix + name
        if name.isascii():
            path = raw if same else prefix + name
        else:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                add_entry(
                    w,
                    error_entry(
                        prefix + nfc(name.encode("utf-8", "replace").decode()),
                        raw,
                        "name is not valid UTF-8; rename it to sync it",
                    ),
                )
                continue
            norm = nfc(name)
            # Most names are their own NFC form: then the path is the on-disk name.
            path = raw if norm == name and same else prefix + norm
        try:
            st = d.stat(follow_symlinks=False)
        except OSError as e:
            add_entry(w, error_entry(path, raw, "cannot stat", e))
            continue
        mode = st.st_mode
        if mode & _S_IFMT == _S_IFREG and st.st_nlink == 1:
            c = get(rel_prefix + raw, None)
            if c is not None and c.holds_for(st, need):
                # Cached digests still hold: what `add_file` + `add_entry` do for a hit, inline.
                w.cache_hits += 1
                sha = c.sha256
                digest = sha if primary == "sha256" else c.digests.get(primary or "")
                if not rel_prefix:
                    # The cache's string for the same name (its key): one copy of each
                    # path kept, not two (72 bytes a file, 70 MB at 1,000,000 files).
                    path = c.path if path is raw else path
                    raw = c.path
                entries.append(
                    new_local_entry(
                        path, raw, "file", c.size, c.mtime_ns, sha, primary, digest, True, ""
                    )
                )
                w.files += 1
                if w.files > cap:
                    raise over_cap(w.entry_cap, "files")
                if w.progress is not None and not w.files & 1023:
                    w.progress(w.files, w.bytes_hashed)
                continue
            add_file(w, fd, name, path, raw, st)
        elif stat.S_ISREG(mode):
            # A hard link may be a name for a file outside the root; transfers refuse
            # such files (docs/design.md section 9), so the plan does not propose them.
            note = f"{st.st_nlink} hard links: not synced (one may lie outside the root)"
            add_entry(w, LocalEntry(path, raw, "skipped", st.st_size, st.st_mtime_ns, note=note))
        elif stat.S_ISDIR(mode):
            mark = len(entries)
            if name in subs:
                assert pieces is not None
                top, w.cached = w.cached, pieces.piece(rel_prefix + raw)
                _dir(w, fd, name, path, raw, st, depth + 1)
                w.cached = top
            else:
                _dir(w, fd, name, path, raw, st, depth + 1)
            if depth == 0 and w.folder_done is not None:
                w.folder_done(raw, entries[mark:])
        else:
            what = next((label for test, label in _SPECIAL if test(mode)), "special file")
            add_entry(w, LocalEntry(path, raw, "skipped", note=f"{what}: not synced"))


def _dir(
    w: Walk, parent_fd: int, name: str, path: str, raw: str, st: os.stat_result, depth: int
) -> None:
    if depth >= w.max_depth:
        add_entry(
            w,
            error_entry(path, raw, f"deeper than {w.max_depth} levels below the root; not listed"),
        )
        return
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as e:
        add_entry(w, error_entry(path, raw, "cannot open folder", e))
        return
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            add_entry(w, error_entry(path, raw, "replaced while being indexed; index again"))
            return
        mark = len(w.entries)
        add_entry(w, LocalEntry(path, raw, "dir", mtime_ns=st.st_mtime_ns))
        try:
            below = raw + "/"
            _walk_dir(w, fd, below if path is raw else path + "/", below, depth)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT):
                w.entries[mark] = error_entry(path, raw, "cannot list folder", e)
                w.specials += 1
            else:
                raise
    finally:
        os.close(fd)


def _open_folder(root_path: Path, parts: Sequence[str]) -> int:
    """Open root/parts by descriptor, one component at a time, refusing symlinks."""
    shown = "/".join(parts) or "."
    fd = -1
    try:
        fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in parts:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except OSError as e:
        if fd >= 0:
            os.close(fd)
        if e.errno == errno.ENOENT:
            raise NotFound(
                f"cannot index {shown!r} under {str(root_path)!r}: it does not exist",
                details={"path": shown},
            ) from e
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            link = e.errno == errno.ELOOP or _is_link(root_path, parts)
            raise PathRefused(
                f"cannot index {shown!r}: a component is "
                f"{'a symlink' if link else 'not a folder'}; name a real folder inside the root",
                code="symlink_refused" if link else "path_invalid",
                details={"path": shown},
            ) from e
        raise PathRefused(
            f"cannot index {shown!r}: {os.strerror(e.errno or 0)}; check its permissions",
            code="permission_denied",
            details={"path": shown},
        ) from e


def _is_link(root_path: Path, parts: Sequence[str]) -> bool:
    """Whether some component of root/parts is a symlink (only to word a refusal)."""
    p = root_path
    for part in parts:
        p = p / part
        if p.is_symlink():
            return True
    return False


def _split_rel(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or "\0" in rel or ".." in parts:
        raise PathRefused(
            f"cannot index {rel!r}: name a folder relative to the root, without '..'",
            code="path_invalid",
            details={"path": rel},
        )
    return parts


def index_local(
    root_path: Path,
    rel: str,
    *,
    digest_types: Sequence[str],
    cache: DigestCache,
    root_key: str,
    workers: int = 4,
    now_ns: int | None = None,
    include_hidden: bool = False,
    entry_cap: int = DEFAULT_ENTRY_CAP,
    progress: Callable[[int, int], None] | None = None,
    folder_done: Callable[[str, list[LocalEntry]], None] | None = None,
) -> IndexResult:
    """Walk `root_path/rel` and return every entry with SHA-256 and `digest_types`.

    Args:
        root_path: the local root (absolute; resolved when the owner nominated it).
        rel: the folder to index, relative to the root ("" = the root itself); entry
            paths are relative to it.
        digest_types: remote types to compute besides SHA-256 (sha256/sha1/md5); the
            strongest becomes `LocalEntry.digest_type` (pass the remote's choice,
            `choose_digest_type(capabilities.hash_types)`).
        cache: digests from earlier indexes; fresh ones are written back.
        root_key: the cache namespace of this root (e.g. its name, device and inode).
        workers: hashing threads (1 = hash in the calling thread).
        now_ns: the scan's start for the racily-clean rule (default: the clock now).
        include_hidden: also list names starting with "." (else not entered at all).
        entry_cap: most files, and most folders (docs/design.md section 9: 100,000; the
            cap counts files, so a tree of 100,000 files in 1,000 folders fits).
        progress: called from the walking thread every 1,024 files with (files seen,
            bytes hashed so far in that thread); for a long read's progress figure.
        folder_done: called from the walking thread once the walk is past a top-level
            folder, with its on-disk name and its entries (in walk order; a big file
            hashed by the pool is a placeholder without digests until the end).

    Returns:
        `IndexResult`, entries in path order (NFC `path`, on-disk `raw_path`).

    Raises:
        NotFound / PathRefused: `rel` is missing, a symlink, not a folder, unreadable.
        LimitExceeded: more than `entry_cap` files (or folders).
        UsageError: an unknown digest type.
    """
    requested = normalise_types(digest_types)
    parts = _split_rel(rel)
    start = time.time_ns() if now_ns is None else now_ns
    rel_prefix = "/".join(parts) + "/" if parts else ""
    max_depth = MAX_LOCAL_DEPTH - len(parts)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="placet-hash") if workers > 1 else None
    pieces = cache.pieces(root_key, "/".join(parts))
    w = Walk(
        types=("sha256", *(t for t in requested if t != "sha256")),
        primary=requested[0] if requested else None,
        need=frozenset(t for t in requested if t != "sha256"),
        start_ns=start,
        cached={},
        pieces=pieces,
        rel_prefix=rel_prefix,
        include_hidden=include_hidden,
        entry_cap=entry_cap,
        max_depth=max_depth,
        progress=progress,
        write_part=lambda part: cache.put_many(root_key, part),
        folder_done=folder_done,
        pool=pool,
        slots=threading.BoundedSemaphore(4 * max(workers, 1)),
    )
    fd = _open_folder(root_path, parts)
    if pieces is None:
        w.cached = cache.get_under(root_key, "/".join(parts))
    try:
        with gc_paused():
            _walk_dir(w, fd, "", "", 0)
    except PermissionError as e:
        raise PathRefused(
            f"cannot list {rel or '.'!r}: {e.strerror}; check its permissions",
            code="permission_denied",
            details={"path": rel},
        ) from e
    finally:
        os.close(fd)
        if pool is not None:
            pool.shutdown(wait=True)
    with gc_paused():
        return collect(w, cache, root_key, start)


__all__ = [
    "index_local",
]
