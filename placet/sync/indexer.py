"""The local indexer: walk a folder under a root, digest its files, reuse cached digests.

What it decides, and why:

- The walk goes by directory descriptors, from the root down, each folder opened with
  `O_NOFOLLOW|O_DIRECTORY` under its parent's descriptor, and every entry `lstat`ed
  through it (`os.scandir(fd)`). Nothing is followed: symlinks, FIFOs, sockets and
  devices are listed as `skipped` and never opened (opening a FIFO would block, a
  device could be anything), so a symlink loop cannot hang the walk and no name swapped
  for a link mid-walk leads outside the root (DESIGN.md section 6).
- A regular file with more than one hard link is `skipped` too: transfers refuse it
  (DESIGN.md section 9), since another of its names may lie outside the root.
- A file is opened with `O_NOFOLLOW|O_NONBLOCK` and `fstat`ed: it is hashed only if it
  is still the regular file the walk saw (same device and inode).
- SHA-256 (the evidence digest) and the remote's native types are computed in one read
  (`hash_fd`). Files of `POOL_MIN_BYTES` or more go to a bounded thread pool (at most
  `4 * workers` open at once; hashlib releases the GIL on large chunks); smaller ones
  are hashed in the walking thread, where a hand-off would cost more than the hashing.
- Depth is capped at `placet.paths.MAX_LOCAL_DEPTH` below the root (a deeper folder is
  an `error` entry, not listed), which also bounds any bind-mount loop.
- Unreadable files and folders become `error` entries and the walk goes on; the planner
  plans nothing beneath an unreadable folder, since its listing is unknown.
- A cached digest is reused while (size, mtime_ns, inode, ctime_ns) are unchanged and it
  was stored `verified`. The racily-clean rule (git's): a file whose mtime or ctime
  falls within `RACY_WINDOW_NS` of the scan's start may still be written to within
  the same timestamp tick, so its digest is stored unverified and it is hashed again
  next time. ctime is in the key because `touch -d` can restore an mtime, never a ctime.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

from placet.errors import LimitExceeded, NotFound, PathRefused
from placet.paths import MAX_LOCAL_DEPTH
from placet.sync.cache import (
    DIGEST_CACHE_VERSION,
    NO_DIGESTS,
    CachedDigest,
    DigestCache,
    MemoryDigestCache,
)
from placet.sync.digests import CHUNK_SIZE, hash_fd, normalise_types
from placet.sync.model import DEFAULT_ENTRY_CAP, LocalEntry, gc_paused, new_local_entry, nfc

RACY_WINDOW_NS = 2_000_000_000
"""Timestamp granularity assumed for the racily-clean rule: 2 s covers FAT/exFAT (2 s
mtime), SMB and every finer filesystem, conservatively."""

POOL_MIN_BYTES = 256 * 1024
"""Files at least this large are hashed by the thread pool; smaller ones inline."""

_NAME = attrgetter("name")
_PATH = attrgetter("path")
_S_IFMT, _S_IFREG = stat.S_IFMT(0o177777), stat.S_IFREG
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SPECIAL = (
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


@dataclass(frozen=True, slots=True)
class IndexResult:
    """What `index_local` found: every entry (path order) and how the work went.

    `hashed_count`: files read and hashed this time; `cache_hits`: files whose cached
    digests were reused; `skipped` / `errors`: the entries of those kinds (also in
    `entries`); `bytes_hashed`: bytes read; `scan_start_ns`: the clock the racily-clean
    rule used.
    """

    entries: tuple[LocalEntry, ...]
    hashed_count: int
    cache_hits: int
    skipped: tuple[LocalEntry, ...]
    errors: tuple[LocalEntry, ...]
    bytes_hashed: int = 0
    scan_start_ns: int = 0


@dataclass
class _Walk:
    types: tuple[str, ...]  # sha256 first, then the other requested types
    primary: str | None  # LocalEntry.digest_type
    need: frozenset[str]  # the types besides sha256 a cached entry must hold
    start_ns: int
    cached: Mapping[str, CachedDigest]
    rel_prefix: str  # the indexed folder, relative to the root ("" or "a/b/")
    include_hidden: bool
    entry_cap: int
    max_depth: int
    pool: ThreadPoolExecutor | None
    slots: threading.BoundedSemaphore
    entries: list[LocalEntry] = field(default_factory=list)
    jobs: list[Future[tuple[LocalEntry, CachedDigest | None, int]]] = field(default_factory=list)
    cache_hits: int = 0
    fresh: list[CachedDigest] = field(default_factory=list)
    bytes_hashed: int = 0
    files: int = 0
    dirs: int = 0
    specials: int = 0  # skipped or error entries added
    progress: Callable[[int, int], None] | None = None


_buffers = threading.local()


def _buffer() -> bytearray:
    buf: bytearray | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = bytearray(CHUNK_SIZE)
    return buf


def _error(path: str, raw: str, what: str, e: OSError | None = None) -> LocalEntry:
    why = f": {os.strerror(e.errno)}" if e is not None and e.errno else ""
    return LocalEntry(path, raw, "error", note=f"{what}{why}")


def _hash_job(
    w: _Walk, fd: int, path: str, raw: str, st: os.stat_result, slot: bool
) -> tuple[LocalEntry, CachedDigest | None, int]:
    """Hash one opened file; closes `fd` (and frees its pool slot if it holds one)."""
    try:
        fst = os.fstat(fd)
        if (
            not stat.S_ISREG(fst.st_mode)
            or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino)
            or fst.st_nlink > 1
        ):
            return _error(path, raw, "replaced while being indexed; index again"), None, 0
        digests, nbytes = hash_fd(fd, w.types, _buffer())
        after = os.fstat(fd)
    except OSError as e:
        return _error(path, raw, "cannot read file", e), None, 0
    finally:
        os.close(fd)
        if slot:
            w.slots.release()
    changed = nbytes != fst.st_size or (after.st_mtime_ns, after.st_ctime_ns) != (
        fst.st_mtime_ns,
        fst.st_ctime_ns,
    )
    racy = max(fst.st_mtime_ns, fst.st_ctime_ns) >= w.start_ns - RACY_WINDOW_NS
    verified = not changed and not racy
    sha = digests.pop("sha256")
    primary = w.primary
    entry = LocalEntry(
        path,
        raw,
        "file",
        nbytes,
        fst.st_mtime_ns,
        sha,
        primary,
        sha if primary == "sha256" else digests.get(primary or ""),
        verified,
        "changed while being read; index again" if changed else "",
    )
    cached = CachedDigest(
        w.rel_prefix + raw,
        nbytes,
        fst.st_mtime_ns,
        fst.st_ino,
        fst.st_ctime_ns,
        sha,
        digests or NO_DIGESTS,  # kept in memory after the write: share the empty one
        verified,
    )
    return entry, cached, nbytes


def _add(w: _Walk, entry: LocalEntry) -> None:
    w.entries.append(entry)
    # The cap counts files (what a user means by "100,000 files"); folders have a cap
    # of the same size of their own, so a tree of empty folders is bounded too.
    kind = entry.kind
    if kind == "dir":
        w.dirs += 1
        over, what = w.dirs > w.entry_cap, "folders"
    else:
        if kind != "file":
            w.specials += 1
        w.files += 1
        over, what = w.files > w.entry_cap, "files"
        if w.progress is not None and not w.files & 1023:
            w.progress(w.files, w.bytes_hashed)
    if over:
        raise _over(w.entry_cap, what)


def _over(cap: int, what: str) -> LimitExceeded:
    return LimitExceeded(
        f"stopped indexing: more than {cap} {what} under the folder (the entry cap); "
        "index or plan a smaller folder",
        details={"cap": cap, "counted": what},
    )


def _file(w: _Walk, dir_fd: int, name: str, path: str, raw: str, st: os.stat_result) -> None:
    c = w.cached.get(w.rel_prefix + raw)
    if (
        c is not None
        and c.verified
        and c.size == st.st_size
        and c.mtime_ns == st.st_mtime_ns
        and c.inode == st.st_ino
        and c.ctime_ns == st.st_ctime_ns
        and c.digests.keys() >= w.need
    ):
        w.cache_hits += 1
        digest = c.sha256 if w.primary == "sha256" else c.digests.get(w.primary or "")
        _add(
            w,
            LocalEntry(path, raw, "file", c.size, c.mtime_ns, c.sha256, w.primary, digest, True),
        )
        return
    # Small files are hashed right here (see the module docstring).
    pooled = w.pool is not None and st.st_size >= POOL_MIN_BYTES
    if pooled:
        w.slots.acquire()
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if pooled:
            w.slots.release()
        _add(w, _error(path, raw, "cannot open file", e))
        return
    if pooled:
        assert w.pool is not None
        w.jobs.append(w.pool.submit(_hash_job, w, fd, path, raw, st, True))
        _add(w, LocalEntry(path, raw, "file"))  # placeholder, replaced by the job's entry
        return
    entry, cached, n = _hash_job(w, fd, path, raw, st, False)
    if cached is not None:
        w.fresh.append(cached)
        w.bytes_hashed += n
    _add(w, entry)


def _walk_dir(w: _Walk, fd: int, prefix: str, raw_prefix: str, depth: int) -> None:
    """List one open folder; recurse into subfolders (depth-first, names sorted).

    The loop is the index's hot path (100,000 turns for 100,000 files): a file whose
    cached digests still hold is appended right here, everything else goes through
    `_file`, `_dir` and `_add`."""
    with os.scandir(fd) as it:
        items = sorted(it, key=_NAME)
    hidden = w.include_hidden
    same = prefix == raw_prefix
    get = w.cached.get
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
                _add(
                    w,
                    _error(
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
            _add(w, _error(path, raw, "cannot stat", e))
            continue
        mode = st.st_mode
        if mode & _S_IFMT == _S_IFREG and st.st_nlink == 1:
            c = get(rel_prefix + raw)
            if (
                c is not None
                and c.verified
                and c.size == st.st_size
                and c.mtime_ns == st.st_mtime_ns
                and c.inode == st.st_ino
                and c.ctime_ns == st.st_ctime_ns
                and (not need or c.digests.keys() >= need)
            ):
                # Cached digests still hold: what `_file` + `_add` do for a hit, inline.
                w.cache_hits += 1
                sha = c.sha256
                digest = sha if primary == "sha256" else c.digests.get(primary or "")
                entries.append(
                    new_local_entry(
                        path, raw, "file", c.size, c.mtime_ns, sha, primary, digest, True, ""
                    )
                )
                w.files += 1
                if w.files > cap:
                    raise _over(w.entry_cap, "files")
                if w.progress is not None and not w.files & 1023:
                    w.progress(w.files, w.bytes_hashed)
                continue
            _file(w, fd, name, path, raw, st)
        elif stat.S_ISREG(mode):
            # A hard link may be a name for a file outside the root; transfers refuse
            # such files (DESIGN.md section 9), so the plan does not propose them.
            note = f"{st.st_nlink} hard links: not synced (one may lie outside the root)"
            _add(w, LocalEntry(path, raw, "skipped", st.st_size, st.st_mtime_ns, note=note))
        elif stat.S_ISDIR(mode):
            _dir(w, fd, name, path, raw, st, depth + 1)
        else:
            what = next((label for test, label in _SPECIAL if test(mode)), "special file")
            _add(w, LocalEntry(path, raw, "skipped", note=f"{what}: not synced"))


def _dir(
    w: _Walk, parent_fd: int, name: str, path: str, raw: str, st: os.stat_result, depth: int
) -> None:
    if depth >= w.max_depth:
        _add(w, _error(path, raw, f"deeper than {w.max_depth} levels below the root; not listed"))
        return
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as e:
        _add(w, _error(path, raw, "cannot open folder", e))
        return
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            _add(w, _error(path, raw, "replaced while being indexed; index again"))
            return
        mark = len(w.entries)
        _add(w, LocalEntry(path, raw, "dir", mtime_ns=st.st_mtime_ns))
        try:
            below = raw + "/"
            _walk_dir(w, fd, below if path is raw else path + "/", below, depth)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT):
                w.entries[mark] = _error(path, raw, "cannot list folder", e)
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
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
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
        entry_cap: most files, and most folders (DESIGN.md section 9: 100,000; the
            cap counts files, so a tree of 100,000 files in 1,000 folders fits).
        progress: called from the walking thread every 1,024 files with (files seen,
            bytes hashed so far in that thread); for a long read's progress figure.

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
    w = _Walk(
        types=("sha256", *(t for t in requested if t != "sha256")),
        primary=requested[0] if requested else None,
        need=frozenset(t for t in requested if t != "sha256"),
        start_ns=start,
        cached=cache.get_under(root_key, "/".join(parts)),
        rel_prefix=rel_prefix,
        include_hidden=include_hidden,
        entry_cap=entry_cap,
        max_depth=max_depth,
        progress=progress,
        pool=pool,
        slots=threading.BoundedSemaphore(4 * max(workers, 1)),
    )
    fd = _open_folder(root_path, parts)
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
        return _collect(w, cache, root_key, start)


def _collect(w: _Walk, cache: DigestCache, root_key: str, start: int) -> IndexResult:
    pooled: dict[str, LocalEntry] = {}
    for fut in w.jobs:
        entry, cached, n = fut.result()
        pooled[entry.raw_path] = entry
        if cached is not None:
            w.fresh.append(cached)
            w.bytes_hashed += n
    entries = w.entries
    if pooled:
        entries = [pooled.get(e.raw_path, e) if e.sha256 is None else e for e in entries]
    entries.sort(key=_PATH)
    scan = bool(w.specials or pooled)
    if w.fresh:
        cache.put_many(root_key, w.fresh)
    return IndexResult(
        entries=tuple(entries),
        hashed_count=len(w.fresh),
        cache_hits=w.cache_hits,
        # Most trees have neither: no scan of 100,000 entries for nothing.
        skipped=tuple(e for e in entries if e.kind == "skipped") if scan else (),
        errors=tuple(e for e in entries if e.kind == "error") if scan else (),
        bytes_hashed=w.bytes_hashed,
        scan_start_ns=start,
    )


__all__ = [
    "DIGEST_CACHE_VERSION",
    "RACY_WINDOW_NS",
    "CachedDigest",
    "DigestCache",
    "IndexResult",
    "MemoryDigestCache",
    "index_local",
]
