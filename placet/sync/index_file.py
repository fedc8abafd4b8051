"""The indexer's per-file work: reuse a file's cached digests, or open and hash it.

`placet.sync.indexer` hands each regular file here (its hot loop inlines the cache-hit
test; the rule is the same). A cached digest is reused while (size, mtime_ns, inode,
ctime_ns) are unchanged and it was stored `verified`; a file whose mtime or ctime falls
within `RACY_WINDOW_NS` of the scan's start is stored unverified (git's racily-clean
rule), and ctime is in the key because `touch -d` restores an mtime, never a ctime. A
file is hashed only if, opened with `O_NOFOLLOW|O_NONBLOCK` and `fstat`ed, it is still the
regular file the walk saw with one hard link. SHA-256 and the remote's types come from one
read; files of `POOL_MIN_BYTES` or more go to a bounded thread pool. The entry cap counts
files as they are added (docs/decisions/0025-digest-caches.md)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter

from placet.errors import LimitExceeded
from placet.local.hashing import CHUNK
from placet.sync.cache import NO_DIGESTS, CachedDigest
from placet.sync.digests import hash_fd
from placet.sync.entries import LocalEntry

RACY_WINDOW_NS = 2_000_000_000
"""Timestamp granularity assumed for the racily-clean rule: 2 s covers FAT/exFAT (2 s
mtime), SMB and every finer filesystem, conservatively."""

POOL_MIN_BYTES = 256 * 1024
"""Files at least this large are hashed by the thread pool; smaller ones inline."""

FRESH_PART = 16_384
"""Fresh digests handed to the cache at a time while the walk goes on (`spill`)."""

_PATH = attrgetter("path")
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
class Walk:
    """One `index_local` run's settings, state and results so far."""

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
    write_part: Callable[[list[CachedDigest]], None] | None = None  # see `spill`
    fresh_written: int = 0  # fresh digests handed to `write_part` so far


_buffers = threading.local()


def _buffer() -> bytearray:
    buf: bytearray | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = bytearray(CHUNK)
    return buf


def error_entry(path: str, raw: str, what: str, e: OSError | None = None) -> LocalEntry:
    """An `error` entry for `path` (on-disk `raw`): `what` failed, and the OS reason."""
    why = f": {os.strerror(e.errno)}" if e is not None and e.errno else ""
    return LocalEntry(path, raw, "error", note=f"{what}{why}")


def hash_job(
    w: Walk, fd: int, path: str, raw: str, st: os.stat_result, slot: bool
) -> tuple[LocalEntry, CachedDigest | None, int]:
    """Hash one opened file; closes `fd` (and frees its pool slot if it holds one)."""
    try:
        fst = os.fstat(fd)
        if (
            not stat.S_ISREG(fst.st_mode)
            or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino)
            or fst.st_nlink > 1
        ):
            return error_entry(path, raw, "replaced while being indexed; index again"), None, 0
        digests, nbytes = hash_fd(fd, w.types, _buffer())
        after = os.fstat(fd)
    except OSError as e:
        return error_entry(path, raw, "cannot read file", e), None, 0
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
    mtime, ctime = fst.st_mtime_ns, fst.st_ctime_ns
    cached = CachedDigest(
        w.rel_prefix + raw,
        nbytes,
        mtime,
        fst.st_ino,
        mtime if ctime == mtime else ctime,  # one int object when equal (the usual file)
        sha,
        digests or NO_DIGESTS,  # kept in memory after the write: share the empty one
        verified,
    )
    return entry, cached, nbytes


def add_entry(w: Walk, entry: LocalEntry) -> None:
    """Append `entry` to the walk, counting it against the entry cap.

    Raises:
        LimitExceeded: more than `w.entry_cap` files (or folders).
    """
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
        raise over_cap(w.entry_cap, what)


def over_cap(cap: int, what: str) -> LimitExceeded:
    """The error for more than `cap` `what` ("files" or "folders") under the folder."""
    return LimitExceeded(
        f"stopped indexing: more than {cap} {what} under the folder (the entry cap); "
        "index or plan a smaller folder",
        details={"cap": cap, "counted": what},
    )


def add_file(w: Walk, dir_fd: int, name: str, path: str, raw: str, st: os.stat_result) -> None:
    """Add the regular file `name` of the open folder `dir_fd` (`st`: its `lstat`): from
    the cache if its digests still hold, else hashed here or queued on the pool."""
    c = w.cached.get(w.rel_prefix + raw)
    if c is not None and c.holds_for(st, w.need):
        w.cache_hits += 1
        digest = c.sha256 if w.primary == "sha256" else c.digests.get(w.primary or "")
        add_entry(
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
        add_entry(w, error_entry(path, raw, "cannot open file", e))
        return
    if pooled:
        assert w.pool is not None
        w.jobs.append(w.pool.submit(hash_job, w, fd, path, raw, st, True))
        add_entry(w, LocalEntry(path, raw, "file"))  # placeholder, replaced by the job's entry
        return
    entry, cached, n = hash_job(w, fd, path, raw, st, False)
    if cached is not None:
        w.fresh.append(cached)
        w.bytes_hashed += n
        if len(w.fresh) >= FRESH_PART:
            spill(w)
    add_entry(w, entry)


def spill(w: Walk) -> None:
    """Hand the fresh digests so far to the cache (`cache.put_many`), so a cold index of
    1,000,000 files does not hold them all until it ends (~170 bytes a file)."""
    if w.write_part is not None and w.fresh:
        part, w.fresh = w.fresh, []
        w.fresh_written += len(part)
        w.write_part(part)
