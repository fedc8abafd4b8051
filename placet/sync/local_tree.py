"""The local folder read a folder at a time: the merge's local side (`placet.sync.march`),
and what `placet.sync.indexer.index_local` walks whole.

Folders are opened by descriptor from the root down (`O_NOFOLLOW|O_DIRECTORY`,
`os.scandir(fd)`), so nothing is followed: symlinks, FIFOs, sockets and devices are
listed `skipped` and never opened, and no name swapped mid-walk leads outside the root
(docs/design.md section 6). A file with several hard links is `skipped` too (transfers
refuse it). Depth is capped at `MAX_LOCAL_DEPTH`; unreadable files and folders become
`error` entries (nothing is planned beneath such a folder), as does a name that is not
valid UTF-8. Names are NFC-normalised for `path`; `raw_path` keeps the on-disk name.
A folder is opened (`open`: its names read, an `error` entry if it cannot be) and then
listed (`listing`: each entry stat'ed, each regular file given its digests by
`placet.sync.index_file`, cached or read); its descriptor stays open until `done`. A
digest cache too big to hold is read a folder at a time as the walk lists it
(`placet.sync.cache.FolderRows`)."""

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
from placet.sync.cache import CachedDigest, DigestCache, FolderRows, OwnedRows
from placet.sync.digests import normalise_types
from placet.sync.entries import LocalEntry, new_local_entry, nfc
from placet.sync.index_file import (
    FRESH_PART,
    Walk,
    add_entry,
    add_file,
    error_entry,
    over_cap,
    spill,
)
from placet.sync.model import DEFAULT_ENTRY_CAP

_NAME = attrgetter("name")
_PATH = attrgetter("path")
_S_IFMT, _S_IFREG = stat.S_IFMT(0o177777), stat.S_IFREG
_SPECIAL = (
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)
_LISTING_ERRORS = (errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT)
"""Why a folder may fail to list and become an `error` entry (others are raised)."""


class LocalTree:
    """One walk of `root_path/rel` (see the module docstring); `close` ends it.

    Args:
        root_path: the local root (absolute; resolved when the owner nominated it).
        rel: the folder to walk, relative to the root ("" = the root itself); entry
            paths are relative to it.
        digest_types: remote types to compute besides SHA-256 (sha256/sha1/md5); the
            strongest becomes `LocalEntry.digest_type` (pass the remote's choice,
            `choose_digest_type(capabilities.hash_types)`).
        cache: digests from earlier walks; fresh ones are written back.
        root_key: the cache namespace of this root (e.g. its name, device and inode).
        workers: hashing threads (1 = hash in the calling thread).
        now_ns: the scan's start for the racily-clean rule (default: the clock now).
        include_hidden: also list names starting with "." (else not entered at all).
        entry_cap: most files, and most folders (docs/design.md section 9: 100,000; the
            cap counts files, so a tree of 100,000 files in 1,000 folders fits).
        progress: called from the walking thread every 1,024 files with (files seen,
            bytes hashed so far in that thread); for a long read's progress figure.

    Raises (from the constructor):
        NotFound / PathRefused: `rel` is missing, a symlink, not a folder, unreadable.
        UsageError: an unknown digest type.
    """

    def __init__(
        self,
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
    ) -> None:
        requested = normalise_types(digest_types)
        parts = _split_rel(rel)
        self.start_ns = time.time_ns() if now_ns is None else now_ns
        self.cache, self.root_key = cache, root_key
        self.max_depth = MAX_LOCAL_DEPTH - len(parts)
        self.rel = "/".join(parts)
        pool = (
            ThreadPoolExecutor(workers, thread_name_prefix="placet-hash") if workers > 1 else None
        )
        self.w = Walk(
            types=("sha256", *(t for t in requested if t != "sha256")),
            primary=requested[0] if requested else None,
            need=frozenset(t for t in requested if t != "sha256"),
            start_ns=self.start_ns,
            cached={},
            rel_prefix=self.rel + "/" if parts else "",
            include_hidden=include_hidden,
            entry_cap=entry_cap,
            max_depth=self.max_depth,
            progress=progress,
            write_part=lambda part: cache.put_many(root_key, part),
            pool=pool,
            slots=threading.BoundedSemaphore(4 * max(workers, 1)),
        )
        self.by_folder: FolderRows[CachedDigest] | None = None
        self.left: list[str] = []  # rows of files gone since, read a folder at a time
        self.fds: dict[str, int] = {"": _open_folder(root_path, parts)}
        try:
            self.by_folder = cache.local_folders(root_key)
            if self.by_folder is None:
                self.w.cached = cache.get_under(root_key, self.rel)
        except BaseException:
            self.close()
            raise
        # Opened folders' names, until listed; each listed folder's (dev, ino).
        self.opened: dict[str, list[os.DirEntry[str]]] = {}
        self.stats: dict[str, tuple[int, int]] = {}
        self.root_path = root_path
        self.rows_found = 0  # lookups that found a cached row
        self.rows_at_start = len(self.w.cached)

    # ---- the merge's local side -----------------------------------------------------

    def open(self, folder: LocalEntry) -> LocalEntry:
        """Open `folder` (a `dir` entry `listing` gave) and read its names: `folder`,
        or an `error` entry when it is too deep, cannot be opened or read, or was
        replaced since it was listed."""
        raw, path = folder.raw_path, folder.path
        dev_ino = self.stats.pop(raw, None)
        if raw.count("/") + 1 >= self.max_depth:
            return self._error(
                error_entry(
                    path, raw, f"deeper than {self.max_depth} levels below the root; not listed"
                )
            )
        parent, _, name = raw.rpartition("/")
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=self.fds[parent])
        except OSError as e:
            return self._error(error_entry(path, raw, "cannot open folder", e))
        try:
            fst = os.fstat(fd)
            if dev_ino is not None and (fst.st_dev, fst.st_ino) != dev_ino:
                os.close(fd)
                return self._error(
                    error_entry(path, raw, "replaced while being indexed; index again")
                )
            with os.scandir(fd) as it:
                items = sorted(it, key=_NAME)
        except OSError as e:
            os.close(fd)
            if e.errno in _LISTING_ERRORS:
                return self._error(error_entry(path, raw, "cannot list folder", e))
            raise
        self.fds[raw] = fd
        self.opened[raw] = items
        return folder

    def _error(self, entry: LocalEntry) -> LocalEntry:
        self.w.specials += 1
        return entry

    def listing(self, key: str, folders: Sequence[LocalEntry]) -> list[LocalEntry]:
        """The entries directly in `folders` (each opened), or in the walked folder
        itself when there are none, sorted by NFC path (names in on-disk order within
        one path)."""
        w = self.w
        w.entries = []
        if not folders:
            try:
                with os.scandir(self.fds[""]) as it:
                    items = sorted(it, key=_NAME)
            except PermissionError as e:
                raise PathRefused(
                    f"cannot list {self.rel or '.'!r}: {e.strerror}; check its permissions",
                    code="permission_denied",
                    details={"path": self.rel},
                ) from e
            self._rows("", items)
            self._list(self.fds[""], items, "", "")
        for f in folders:
            below = f.raw_path + "/"
            prefix = below if f.path == f.raw_path else f.path + "/"
            items = self.opened.pop(f.raw_path)
            self._rows(f.raw_path, items)
            self._list(self.fds[f.raw_path], items, prefix, below)
        self._left()
        entries = w.entries
        w.entries = []
        if w.jobs:
            entries = self._hashed(entries)
        entries.sort(key=_PATH)
        return entries

    def _rows(self, raw: str, items: list[os.DirEntry[str]]) -> None:
        """Read the cached rows of folder `raw` (relative to the walked folder) when the
        cache is read a folder at a time; its subfolders' trees are left for later."""
        if self.by_folder is None:
            return
        folder = self.w.rel_prefix + raw if raw else self.rel
        subs = [d.name for d in items if d.is_dir(follow_symlinks=False)]
        rows = self.by_folder.rows(folder, subs)
        if isinstance(self.w.cached, OwnedRows) and self.w.cached:
            self.left += self.w.cached  # several folders under one key: the last's rest
        self.w.cached = rows

    def _left(self) -> None:
        """A folder read a folder at a time is listed: its rows not taken are files
        gone since (beneath folders gone since, too)."""
        if self.by_folder is not None and self.w.cached:
            self.left += self.w.cached
            self.w.cached = OwnedRows()

    def done(self, folders: Sequence[LocalEntry]) -> None:
        """Everything beneath `folders` is read: their descriptors are closed."""
        for f in folders:
            fd = self.fds.pop(f.raw_path, None)
            if fd is not None:
                os.close(fd)

    # ---- the walk -------------------------------------------------------------------

    def _list(self, fd: int, items: list[os.DirEntry[str]], prefix: str, raw_prefix: str) -> None:
        """Add the entries of one opened folder (`prefix`: its NFC path + "/";
        `raw_prefix`: its on-disk one) to `w.entries`.

        The loop is the walk's hot path (100,000 turns for 100,000 files): a file whose
        cached digests still hold is appended right here, everything else goes through
        `add_file` and `add_entry`."""
        w = self.w
        hidden = w.include_hidden
        same = prefix == raw_prefix
        cached = w.cached
        get = cached.pop if isinstance(cached, OwnedRows) else cached.get
        found = 0
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
                if c is None:
                    add_file(w, fd, name, path, raw, st)
                    continue
                found += 1
                if c.holds_for(st, need):
                    # Cached digests still hold: what `add_file` + `add_entry` do for a hit.
                    w.cache_hits += 1
                    sha = c.sha256
                    digest = sha if primary == "sha256" else c.digests.get(primary or "")
                    if not rel_prefix:
                        # The cache's string for the same name (its key): one copy kept.
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
                add_entry(
                    w, LocalEntry(path, raw, "skipped", st.st_size, st.st_mtime_ns, note=note)
                )
            elif stat.S_ISDIR(mode):
                self.stats[raw] = (st.st_dev, st.st_ino)
                add_entry(w, LocalEntry(path, raw, "dir", mtime_ns=st.st_mtime_ns))
            else:
                what = next((label for test, label in _SPECIAL if test(mode)), "special file")
                add_entry(w, LocalEntry(path, raw, "skipped", note=f"{what}: not synced"))
        self.rows_found += found

    def _hashed(self, entries: list[LocalEntry]) -> list[LocalEntry]:
        """`entries` with each file the pool hashed in place of its placeholder."""
        w = self.w
        pooled: dict[str, LocalEntry] = {}
        for fut in w.jobs:
            entry, cached, n = fut.result()
            pooled[entry.raw_path] = entry
            if cached is not None:
                w.fresh.append(cached)
                w.bytes_hashed += n
        w.jobs = []
        if len(w.fresh) >= FRESH_PART:
            spill(w)
        return [pooled.get(e.raw_path, e) if e.sha256 is None else e for e in entries]

    # ---- the end --------------------------------------------------------------------

    @property
    def hashed_count(self) -> int:
        return self.w.fresh_written + len(self.w.fresh)

    def _shown(self, p: str) -> bool:
        """Whether cached path `p` lies beneath the walked folder, and the walk lists it
        (hidden names only when asked)."""
        below = self.w.rel_prefix
        if not p.startswith(below):
            return False
        q = p[len(below) :]
        return self.w.include_hidden or not (q[:1] == "." or "/." in q)

    def gone(self) -> list[str]:
        """The cached paths beneath the walked folder whose files the walk did not see
        (hidden ones only when hidden names were walked). Call once, after the walk."""
        w = self.w
        if self.by_folder is not None:
            return [p for p in self.left if self._shown(p)]
        cached = w.cached
        if type(cached) is OwnedRows:
            return [p for p in cached if self._shown(p)]
        if self.rows_found == self.rows_at_start:
            return []  # every row was asked for (the copy may have gained fresh ones)
        rows = list(cached)
        if self.rows_found == sum(1 for p in rows if self._shown(p)):
            return []  # every row the walk could ask for was asked for
        # Rare (files were deleted): the rows of paths no longer there. The copy may
        # have gained the walk's fresh digests meanwhile: their files exist.
        lexists, root = os.path.lexists, self.root_path
        return [p for p in rows if self._shown(p) and not lexists(root / p)]

    def close(self) -> None:
        """Close every descriptor, wait for the pool, hand the last fresh digests to
        the cache; safe to call twice."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
        w = self.w
        if w.pool is not None:
            w.pool.shutdown(wait=True)
            w.pool = None
        if w.fresh:
            part, w.fresh = w.fresh, []
            w.fresh_written += len(part)
            self.cache.put_many(self.root_key, part)


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
