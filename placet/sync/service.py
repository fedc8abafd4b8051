"""The I/O around the pure planner: index the local folder, list the remote, load the
baseline, plan, store the plan (docs/design.md sections 5, 7-9).

rclone lists (and hashes) the remote in its own process while this thread indexes the
local folder, so the slower side sets the time; a helper thread only fetches pieces,
decoded here between the index's folders (`PendingListing.pump`), since Python work in a
second thread slows every `lstat` on the GIL. Digests cost once on each side
(docs/decisions/0025-digest-caches.md). The plan is stored immutable and reused when
identical within the hour; a missing remote folder is an empty side; with a `budget` a
long plan raises the retryable `in_progress` and goes on in the background
(docs/decisions/0024-sync-plans.md). Digest-less remote files a transfer would touch are
read once (`placet.sync.content`). The plan's memory is bounded as
docs/decisions/0026-plan-memory.md says. The caller's scope is a `ProposeContext`."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import queue
import secrets
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Concatenate, ParamSpec

from placet.config import Settings
from placet.drive.base import Drive, preferred_digest
from placet.errors import PathRefused, PlacetError
from placet.paths.local import resolve_local
from placet.paths.remote import check_remote_path
from placet.paths.roots import Root
from placet.proposals.context import ProposeContext
from placet.schema import DIGEST_PREFERENCE
from placet.store import Store
from placet.store.db import utcnow
from placet.sync.cache import CachedDigest, CachePieces, OwnedRows
from placet.sync.content import ReadBudget, bind_content
from placet.sync.entries import BaselineEntry, LocalEntry, OneDigest, RemoteEntry, gc_paused
from placet.sync.heap import release_free_heap
from placet.sync.index_file import IndexResult
from placet.sync.indexer import index_local
from placet.sync.jobs import LongReads, Progress
from placet.sync.model import SyncPlan
from placet.sync.planner import plan
from placet.sync.remote import RemoteLister, SyncDigestStore
from placet.sync.stored import SyncData
from placet.sync.tables import Pair, RowPacker, SkipRow, StoredPlan
from placet.text import inert

log = logging.getLogger(__name__)

KEEP_IN_MEMORY = 8
"""Plans and indexes kept in memory for their next pages."""

WRITES_QUEUED = 2
"""Parts of fresh digests (65,536 each) waiting for the cache writer, at most."""


def root_key(root: Root) -> str:
    """The digest cache namespace of a root: the SHA-256 (64 hex digits) of its path,
    device and inode, NUL-separated. Hex, since PostgreSQL's text holds no NUL (the key
    was the raw NUL-joined text once; migration `digest_cache_hex_root_keys` drops those
    rows)."""
    return hashlib.sha256(os.fsencode(f"{root.path}\0{root.device}\0{root.inode}")).hexdigest()


def _hidden(path: str) -> bool:
    return path[:1] == "." or "/." in path


class _DeferredWrites:
    """The digest cache as `index_local` sees it: reads go to `SyncData`; writes (parts
    of fresh digests, handed over while the walk goes on) are written in the calling
    thread, or with `background` by a thread of their own, started with the first
    part, that `close` hands back for the caller to wait for. A write that fails is
    logged: a cache that was not written only costs hashing again."""

    def __init__(self, data: SyncData, *, background: bool) -> None:
        self.data, self.background = data, background
        # Bounded: on a loaded box the writer falls behind a cold walk, and parts
        # waiting unwritten cost ~170 bytes a file (at 1,000,000 files, up to 170 MB);
        # the walk waits for the writer instead.
        self.queue: queue.Queue[tuple[str, list[CachedDigest]] | None] = queue.Queue(
            maxsize=WRITES_QUEUED
        )
        self.writer: threading.Thread | None = None
        self.owned: OwnedRows[CachedDigest] | None = None  # what the index did not take
        self.read_by_piece: CachePieces | None = None  # the rows, a folder at a time

    def get(self, root_key: str, path: str) -> CachedDigest | None:
        return self.data.get(root_key, path)

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        rows = self.data.get_under(root_key, prefix)
        if type(rows) is OwnedRows:
            self.owned = rows
        return rows

    def pieces(self, root_key: str, prefix: str) -> CachePieces | None:
        self.read_by_piece = self.data.pieces(root_key, prefix)
        return self.read_by_piece

    def put_many(self, root_key: str, entries: Iterable[CachedDigest]) -> None:
        batch = list(entries)
        if not self.background:
            self._write(root_key, batch)
            return
        self.queue.put((root_key, batch))
        del batch
        if self.writer is None:
            self.writer = threading.Thread(target=self._run, name="placet-cache-write", daemon=True)
            self.writer.start()

    def _write(self, root_key: str, batch: list[CachedDigest]) -> None:
        try:
            # Consumed: the rows go as they are written (~170 bytes a file).
            self.data.put_many(root_key, batch, consume=True)
        except Exception:
            log.exception("writing the digest cache failed; the next index hashes again")

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            self._write(*item)
            del item

    def close(self) -> threading.Thread | None:
        """No more parts: the writing thread (None if none was started), which ends
        once every part is written."""
        if self.writer is not None:
            self.queue.put(None)
        return self.writer


@dataclass(frozen=True)
class Folder:
    """A local folder the caller may read: its root and path relative to it ("" = root)."""

    root: Root
    rel: str

    @property
    def path(self) -> Path:
        return self.root.path.joinpath(*[p for p in self.rel.split("/") if p])


@dataclass(frozen=True)
class IndexedFolder:
    """A finished index of `folder` (entries in path order)."""

    folder: Folder
    include_hidden: bool
    digest_type: str | None
    result: IndexResult
    made_at: datetime


_P = ParamSpec("_P")


def _planning(
    make: Callable[Concatenate[SyncService, _P], StoredPlan],
) -> Callable[Concatenate[SyncService, _P], StoredPlan]:
    """`make` run with the cyclic GC paused, then the digest cache writes it deferred
    waited for (`SyncService.wait_for_writes`, on success or error), still paused.

    What a plan builds is acyclic, and it is all freed (by reference counting) when
    `make` returns, before the GC is back on, so no collection ever walks those
    100,000s of objects (`placet.sync.entries.gc_paused`).
    """

    @functools.wraps(make)
    def run(service: SyncService, /, *args: _P.args, **kwargs: _P.kwargs) -> StoredPlan:
        with gc_paused():
            try:
                return make(service, *args, **kwargs)
            finally:
                service.wait_for_writes()

    return run


class SyncService:
    """Indexing, planning and plan storage for one process (thread-safe).

    Counters for tests and benches: `local_files_hashed` (files the indexer read),
    `remote_files_hashed` (remote files whose digest was computed, not cached).

    `clock_ns` gives each index's start in nanoseconds since the epoch, for the
    racily-clean rule (`placet.sync.index_file.RACY_WINDOW_NS`); tests inject one that
    runs ahead instead of waiting for their files to age.
    """

    def __init__(
        self, store: Store, settings: Settings, *, clock_ns: Callable[[], int] = time.time_ns
    ) -> None:
        self.settings = settings
        self.clock_ns = clock_ns
        self.data = SyncData(store)
        self.jobs = LongReads()
        self.local_files_hashed = 0
        self.remote = RemoteLister(self.data)
        self.read_budget = ReadBudget()  # placet.sync.content: what a plan reads to bind
        self._plans: OrderedDict[int, StoredPlan] = OrderedDict()
        self._indexes: OrderedDict[str, IndexedFolder] = OrderedDict()
        self._writers: list[threading.Thread] = []
        self._lock = threading.Lock()

    # ---- paths ------------------------------------------------------------------------

    def folder(self, ctx: ProposeContext, path: str, root_name: str | None) -> Folder:
        """Resolve an agent-named local folder (section 6 rules, client roots narrow).

        Raises:
            PathRefused / NotFound: see `placet.paths.local.resolve_local`; `not_a_directory`
                when it names a file; `path_outside_root` outside the client's roots.
        """
        root, rel = resolve_local(ctx.roots, path, root_name or None, must_exist=True)
        target = root.path.joinpath(*rel.parts)
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            raise PathRefused(
                f"refusing {inert(path)!r}: it is a file, not a folder; name a folder "
                "inside the root",
                code="not_a_directory",
                details={"path": path, "root": root.name},
            )
        if ctx.allowed is not None and not any(
            os.path.commonpath([target, a]) == str(a) for a in ctx.allowed
        ):
            raise PathRefused(
                f"refusing {inert(path)!r}: it lies outside the roots your MCP client "
                "declared; name a folder inside them",
                code="path_outside_root",
                details={"path": path, "client_roots": [str(a) for a in ctx.allowed]},
            )
        return Folder(root, "/".join(rel.parts))

    # ---- local index ------------------------------------------------------------------

    def index(
        self,
        folder: Folder,
        *,
        digest_type: str | None,
        include_hidden: bool,
        progress: Progress | None = None,
        defer_writes: bool = False,
        between: Callable[[], None] | None = None,
        folder_done: Callable[[str, list[LocalEntry]], None] | None = None,
    ) -> IndexResult:
        """Index `folder` with SHA-256 and `digest_type`, through the digest cache.

        Cache rows of files no longer there are dropped (hidden ones only when they were
        listed). With `defer_writes`, fresh digests are written by a thread the caller
        must wait for (`wait_for_writes`). `between` is called from this thread every
        1,024 files (the plan decodes the remote listing there), `folder_done` as each
        top-level folder is walked (see `index_local`). Raises what `index_local` raises.
        """
        key = root_key(folder.root)

        def tick(files: int, hashed: int) -> None:
            if progress is not None:
                progress.files, progress.bytes_hashed = files, hashed
            if between is not None:
                between()

        if progress is not None:
            progress.phase = "indexing local files"
        cache = _DeferredWrites(self.data, background=defer_writes)
        try:
            res = index_local(
                folder.root.path,
                folder.rel,
                digest_types=[digest_type] if digest_type else [],
                cache=cache,
                root_key=key,
                include_hidden=include_hidden,
                entry_cap=self.settings.plan_entry_cap,
                now_ns=self.clock_ns(),
                progress=tick,
                folder_done=folder_done,
            )
        finally:
            # With `defer_writes`, the fresh digests (about a second of SQLite work per
            # 100,000, which releases the GIL) are written beside the walk, the listing
            # and the planning; the caller waits for them (`wait_for_writes`).
            writer = cache.close()
            if writer is not None:
                with self._lock:
                    self._writers.append(writer)
        self.local_files_hashed += res.hashed_count
        if progress is not None:
            progress.files, progress.bytes_hashed = len(res.entries), res.bytes_hashed
        # Rows of files that are gone are dropped when the cache is in memory anyway (a
        # warm index); right after a cold one it was just rewritten, and the next plan
        # does it without reading the table back now.
        loaded = self.data.loaded_local(key)
        if cache.read_by_piece is not None:
            # Read a top-level folder at a time: what no folder's walk took are files
            # gone since (hidden ones only when they were listed).
            prefix = folder.rel + "/" if folder.rel else ""
            gone = [
                p
                for p in cache.read_by_piece.left()
                if include_hidden or not _hidden(p[len(prefix) :])
            ]
            self.data.forget_local(key, gone)
        elif cache.owned is not None:
            # Rows loaded for this index alone: the walk took every path it listed, so
            # what is left are files gone since (hidden ones only when they were listed).
            prefix = folder.rel + "/" if folder.rel else ""
            left, cache.owned = cache.owned, None
            gone = [p for p in left if include_hidden or not _hidden(p[len(prefix) :])]
            del left
            self.data.forget_local(key, gone)
        elif loaded is None or (
            not folder.rel
            and (
                res.cache_hits == len(loaded)
                or sum(1 for e in res.entries if e.raw_path in loaded) == len(loaded)
            )
        ):
            pass  # not in memory, or every cached path is listed now: none is gone
        else:
            # Rare (files were deleted, or a subfolder was indexed): the paths and a set
            # of what was listed, which a plain re-plan does not build.
            cached = list(loaded)
            prefix = folder.rel + "/" if folder.rel else ""
            seen = {prefix + e.raw_path for e in res.entries}
            below = folder.rel + "/"
            gone = [
                p
                for p in cached
                if (not folder.rel or p.startswith(below))
                and p not in seen
                and (include_hidden or not _hidden(p[len(prefix) :]))
            ]
            self.data.forget_local(key, gone)
        return res

    def wait_for_writes(self) -> None:
        """Wait until the digest cache writes `index` started are in the database."""
        with self._lock:
            writers, self._writers = self._writers, []
        for w in writers:
            w.join()

    def local_index(
        self,
        ctx: ProposeContext,
        *,
        path: str,
        root: str | None,
        include_hidden: bool,
        budget: float | None,
    ) -> IndexedFolder:
        """Index an agent-named folder as a long read keyed by its arguments.

        The digest type is the drive's preferred one (so a later plan reuses the cache);
        when the drive cannot be asked, SHA-256 alone.
        """
        folder = self.folder(ctx, path, root)
        try:
            dtype = preferred_digest(ctx.drive.capabilities())
        except PlacetError as e:
            log.info("drive capabilities unavailable (%s); indexing with sha256 only", e)
            dtype = None
        key = ("index", str(folder.root.path), folder.rel, include_hidden, dtype)

        def work(progress: Progress) -> IndexedFolder:
            res = self.index(
                folder, digest_type=dtype, include_hidden=include_hidden, progress=progress
            )
            return IndexedFolder(folder, include_hidden, dtype, res, utcnow())

        return self.jobs.run(key, work, budget=budget, what=f"indexing {path!r}")

    # ---- remote listing ---------------------------------------------------------------

    @property
    def remote_files_hashed(self) -> int:
        """Remote files whose digest was computed, not taken from the cache."""
        return self.remote.files_hashed

    def remote_listing(
        self, drive: Drive, folder: str, progress: Progress | None = None
    ) -> tuple[list[RemoteEntry], bool]:
        """See `placet.sync.remote.RemoteLister.remote_listing`."""
        return self.remote.remote_listing(drive, folder, progress)

    # ---- planning ---------------------------------------------------------------------

    def share_digest_cache(self, drive: Drive) -> None:
        """Hand `drive` this service's persistent remote digest cache
        (`Drive.use_digest_store`): the drive's own listings with digests (drive_list,
        drive_changes) then reuse and fill the same cache as the plans, across
        processes. `placet serve` calls it at start-up; every plan calls it again."""
        drive.use_digest_store(SyncDigestStore(self.data, drive.spec))

    @_planning
    def make_plan(
        self,
        ctx: ProposeContext,
        folder: Folder,
        remote: str,
        *,
        include_hidden: bool,
        allow_empty_side: bool,
        progress: Progress | None = None,
    ) -> StoredPlan:
        """Index, list, load the baseline, plan, store (see the module docstring), with
        the cyclic GC paused (`_planning`).

        Raises:
            EmptySideRefused: a side lists empty while a baseline exists (or a listing
                failed) and not `allow_empty_side`.
            LimitExceeded: a side exceeds `settings.plan_entry_cap` files.
            PathRefused / NotFound / DriveUnavailable / DriveError / StoreError.
        """
        drive = ctx.drive
        self.share_digest_cache(drive)  # one digest cache
        caps = drive.capabilities()
        dtype = preferred_digest(caps)
        try:
            drive.clear_caches()  # docs/design.md section 3: never plan from rclone's caches
        except PlacetError as e:
            log.warning("could not clear rclone's caches before planning: %s", e.message)
        pending = self.remote.begin(drive, remote, progress)  # rclone lists meanwhile
        try:
            idx = self.index(
                folder,
                digest_type=dtype,
                include_hidden=include_hidden,
                progress=progress,
                defer_writes=True,
                between=pending.pump,
                folder_done=pending.local_done,
            )
        except BaseException:
            pending.abandon()  # the listing thread ends before the error goes up
            raise
        if progress is not None:
            progress.phase = "listing the remote"
        release_free_heap()  # what the walk freed, before the listing's rest is decoded
        remote_entries, missing = pending.finish()
        del pending  # what it gathered on the way (digest rows, misses) goes now
        pair = Pair(str(folder.root.path), folder.rel, ctx.drive_spec, remote)
        baseline, generation = self.data.baseline(pair)
        if progress is not None:
            progress.phase = "planning"
        cap = self.settings.plan_entry_cap
        # The skips are packed as they are classified, never held as reports.
        skips = SkipPacker(baseline)
        p = plan(
            idx.entries,
            remote_entries,
            baseline,
            caps,
            include_hidden=include_hidden,
            allow_empty_side=allow_empty_side,
            entry_cap=cap,
            on_skip=skips.skip,
        )
        del idx, remote_entries
        options = {"include_hidden": include_hidden, "allow_empty_side": allow_empty_side}
        meta = {"digest_type": dtype, "remote_folder_missing": missing}
        fps = (p.local_fingerprint, p.remote_fingerprint)
        stored = self.data.find_plan(
            pair=pair, options=options, fingerprints=fps, baseline_generation=generation,
            meta=meta,
        )  # fmt: skip
        if stored is None:
            # Transfers of remote files without digests: bound to the bytes read now.
            p = bind_content(p, drive, remote, budget=self.read_budget, progress=progress)
            stored = self.data.save_plan(
                pair=pair,
                root_name=folder.root.name,
                options=options,
                plan=p,
                baseline_generation=generation,
                meta=meta,
                skips=skips,
            )
        self._remember(stored)
        return stored

    def plan_sync(
        self,
        ctx: ProposeContext,
        *,
        local_path: str,
        remote_path: str,
        root: str | None,
        include_hidden: bool,
        allow_empty_side: bool,
        budget: float | None,
    ) -> StoredPlan:
        """`make_plan` for agent-named paths, as a long read keyed by its arguments."""
        folder = self.folder(ctx, local_path, root)
        remote = check_remote_path(remote_path)
        key = ("plan", ctx.drive_spec, str(folder.root.path), folder.rel, remote,
               include_hidden, allow_empty_side)  # fmt: skip

        def work(progress: Progress) -> StoredPlan:
            return self.make_plan(
                ctx,
                folder,
                remote,
                include_hidden=include_hidden,
                allow_empty_side=allow_empty_side,
                progress=progress,
            )

        return self.jobs.run(key, work, budget=budget, what=f"planning {local_path!r}")

    def _remember(self, stored: StoredPlan) -> None:
        with self._lock:
            self._plans[stored.id] = stored
            self._plans.move_to_end(stored.id)
            while len(self._plans) > KEEP_IN_MEMORY:
                self._plans.popitem(last=False)

    def load_plan(self, plan_id: int) -> StoredPlan:
        """A stored plan (kept in memory for the pages that follow). Raises NotFound."""
        with self._lock:
            hit = self._plans.get(plan_id)
        if hit is None:
            hit = self.data.load_plan(plan_id)
            self._remember(hit)
        return hit

    def remember_index(self, indexed: IndexedFolder) -> str:
        """Keep an index for its next pages; returns the token a cursor carries."""
        token = secrets.token_hex(8)
        with self._lock:
            self._indexes[token] = indexed
            while len(self._indexes) > KEEP_IN_MEMORY:
                self._indexes.popitem(last=False)
        return token

    def recall_index(self, token: str) -> IndexedFolder | None:
        """An index kept by `remember_index`, or None once dropped (then index again)."""
        with self._lock:
            return self._indexes.get(token)


def skip_row(path: str, lo: LocalEntry, rem: RemoteEntry, dtype: str | None) -> SkipRow | None:
    """The baseline row (path, sha256, remote digest type, remote digest, size, mtime) a
    skip of `path` verifies (docs/design.md section 7): two folders, or two files found
    equal by `dtype`; None for anything else (equal by size only, a folder and a file).

    Builds what `placet.sync.ops.baseline_for` builds, as a plain tuple and without its
    pydantic evidence model: this runs once per equal path, 1,000,000 times for a tree.
    """
    if lo.kind == "dir":
        return (path, None, None, None, None, rem.mtime) if rem.kind == "dir" else None
    if dtype is None:
        return None
    d = rem.digests
    rtype: str | None
    digest: str | None
    if type(d) is OneDigest and d.digest_type in DIGEST_PREFERENCE and d.value:
        rtype, digest = d.digest_type, d.value  # the usual listing: one digest
    else:
        rtype = next((t for t in DIGEST_PREFERENCE if d.get(t)), None)
        digest = d[rtype] if rtype else None
    if digest is not None and not digest.islower():
        digest = digest.lower()  # (lower() would copy even a lower-case string)
    return (path, lo.sha256, rtype, digest, rem.size, rem.mtime)


def _changes_baseline(row: SkipRow, b: BaselineEntry | None) -> bool:
    return (
        b is None or (b.sha256, b.remote_digest_type, b.remote_digest, b.size, b.mtime) != row[1:]
    )


class SkipPacker(RowPacker):
    """The plan's verified skips packed as it classifies (`plan_listings`' `on_skip`):
    the rows `skip_row` gives where they differ from `baseline`, so a plan of
    1,000,000 equal files holds neither a report nor a row per file, only the packed
    blob (`SyncData.save_plan` stores it as is)."""

    def __init__(self, baseline: Mapping[str, BaselineEntry]) -> None:
        super().__init__()
        self.get = baseline.get

    def skip(self, path: str, lo: LocalEntry, rem: RemoteEntry, dtype: str | None) -> None:
        row = skip_row(path, lo, rem, dtype)
        if row is not None and _changes_baseline(row, self.get(path)):
            self.add(row)


def verified_skips(p: SyncPlan, baseline: dict[str, BaselineEntry]) -> Iterator[SkipRow]:
    """The rows `skip_row` gives for the skips among the plan's reports (not blocked,
    on both sides), where they differ from the baseline now. Yielded, not listed
    (`SyncData.save_plan` packs them as they come)."""
    get = baseline.get
    for r in p.reports:
        lo, rem = r.local, r.remote
        if r.kind != "skip" or lo is None or rem is None or r.blocked_by:
            continue
        row = skip_row(r.path, lo, rem, r.digest_type)
        if row is not None and _changes_baseline(row, get(r.path)):
            yield row
