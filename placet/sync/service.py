"""The I/O around the pure planner: walk the local folder, list the remote, read the
baseline, plan, store the plan (docs/design.md sections 5, 7-9).

A plan merges the two folders folder by folder (`placet.sync.march`): the local walk
(`placet.sync.local_tree`) runs in this thread, rclone lists the remote in its own process
a batch of folders ahead (`placet.sync.remote_tree`), and the baseline and both digest
caches are read in the same order, so a plan holds the folders on its path, not the trees
(docs/decisions/0026-plan-memory.md). Digests cost once on each side
(docs/decisions/0025-digest-caches.md); fresh local ones are written by a thread of their
own. The plan is stored immutable and reused when identical within the hour; a missing
remote folder is an empty side; with a `budget` a long plan raises the retryable
`in_progress` and goes on in the background (docs/decisions/0024-sync-plans.md).
Digest-less remote files a transfer would touch are read once (`placet.sync.content`).
The caller's scope is a `ProposeContext`."""

from __future__ import annotations

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
from placet.sync.baselines import baseline_side
from placet.sync.cache import CachedDigest, FolderRows
from placet.sync.classify import Classifier
from placet.sync.content import ReadBudget, bind_content
from placet.sync.entries import BaselineEntry, LocalEntry, OneDigest, RemoteEntry
from placet.sync.index_file import IndexResult
from placet.sync.indexer import index_local
from placet.sync.jobs import LongReads, Progress
from placet.sync.local_tree import LocalTree
from placet.sync.march import March
from placet.sync.model import SyncPlan
from placet.sync.planner import assemble
from placet.sync.remote import RemoteLister, SyncDigestStore
from placet.sync.remote_tree import RemoteTree, collect
from placet.sync.stored import SyncData
from placet.sync.tables import Pair, RowPacker, SkipRow, StoredPlan
from placet.text import inert

log = logging.getLogger(__name__)

KEEP_IN_MEMORY = 8
"""Plans and indexes kept in memory for their next pages."""

RCD_MEMORY_LIMIT = 96 << 20
"""rcd's soft memory limit while a plan lists (`Drive.soft_memory_limit`), bytes: at
100,000 files its peak went from 190 to 150 MiB for the same CPU (64 MiB doubled the
CPU of a cold listing, the collector running all the time)."""

WRITES_QUEUED = 2
"""Parts of fresh digests (`FRESH_PART` each) waiting for the cache writer, at most."""


def root_key(root: Root) -> str:
    """The digest cache namespace of a root: the SHA-256 (64 hex digits) of its path,
    device and inode, NUL-separated. Hex, since PostgreSQL's text holds no NUL (the key
    was the raw NUL-joined text once; migration `digest_cache_hex_root_keys` drops those
    rows)."""
    return hashlib.sha256(os.fsencode(f"{root.path}\0{root.device}\0{root.inode}")).hexdigest()


def _hidden(path: str) -> bool:
    return path[:1] == "." or "/." in path


class _DeferredWrites:
    """The digest cache as a walk sees it: reads go to `SyncData`; writes (parts
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

    def get(self, root_key: str, path: str) -> CachedDigest | None:
        return self.data.get(root_key, path)

    def get_under(self, root_key: str, prefix: str) -> Mapping[str, CachedDigest]:
        return self.data.get_under(root_key, prefix)

    def local_folders(self, root_key: str) -> FolderRows[CachedDigest] | None:
        return self.data.local_folders(root_key)

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


@dataclass(frozen=True)
class _Merged:
    """A merge's plan and the verified skips packed beside it."""

    plan: SyncPlan
    skips: SkipPacker


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

    def _tree(
        self,
        folder: Folder,
        cache: _DeferredWrites,
        *,
        digest_type: str | None,
        include_hidden: bool,
        progress: Progress | None,
    ) -> LocalTree:
        """A walk of `folder` with SHA-256 and `digest_type`, through the digest cache."""

        def tick(files: int, hashed: int) -> None:
            if progress is not None:
                progress.files, progress.bytes_hashed = files, hashed

        return LocalTree(
            folder.root.path,
            folder.rel,
            digest_types=[digest_type] if digest_type else [],
            cache=cache,
            root_key=root_key(folder.root),
            include_hidden=include_hidden,
            entry_cap=self.settings.plan_entry_cap,
            now_ns=self.clock_ns(),
            progress=tick,
        )

    def _walked(self, tree: LocalTree, cache: _DeferredWrites) -> None:
        """After a walk: its fresh digests written (waited for), the rows of files gone
        since dropped (hidden ones only when they were listed), the count of files
        hashed."""
        writer = cache.close()
        if writer is not None:
            writer.join()
        self.local_files_hashed += tree.hashed_count
        gone = tree.gone()
        if gone:
            self.data.forget_local(tree.root_key, gone)

    def index(
        self,
        folder: Folder,
        *,
        digest_type: str | None,
        include_hidden: bool,
        progress: Progress | None = None,
    ) -> IndexResult:
        """Index `folder` whole with SHA-256 and `digest_type`, through the digest cache
        (see `_walked`). Raises what `LocalTree` and `index_local` raise."""
        if progress is not None:
            progress.phase = "indexing local files"
        cache = _DeferredWrites(self.data, background=False)
        tree = self._tree(
            folder, cache, digest_type=digest_type, include_hidden=include_hidden,
            progress=progress,
        )  # fmt: skip
        try:
            res = index_local(tree)
        finally:
            self._walked(tree, cache)
        if progress is not None:
            progress.files, progress.bytes_hashed = len(res.entries), res.bytes_hashed
        return res

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
        """The whole listing of remote `folder` with digests, as a plan reads it, and
        whether the folder is missing (an empty side).

        Raises:
            PathRefused (`not_a_directory`): `folder` is a file. DriveUnavailable /
                DriveError: rclone failed.
        """
        ci = drive.capabilities().case_insensitive
        tree = RemoteTree(self.remote, drive, folder, case_insensitive=ci,
                          include_hidden=True, progress=progress)  # fmt: skip
        try:
            got = collect(tree, ci, include_hidden=True)
        finally:
            tree.finish()
        return got, tree.missing

    # ---- planning ---------------------------------------------------------------------

    def share_digest_cache(self, drive: Drive) -> None:
        """Hand `drive` this service's persistent remote digest cache
        (`Drive.use_digest_store`): the drive's own listings with digests (drive_list,
        drive_changes) then reuse and fill the same cache as the plans, across
        processes. `placet serve` calls it at start-up; every plan calls it again."""
        drive.use_digest_store(SyncDigestStore(self.data, drive.spec))

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
        """Merge the two folders folder by folder against the baseline, and store the
        plan (see the module docstring).

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
        ci = bool(caps.case_insensitive)
        try:
            drive.clear_caches()  # docs/design.md section 3: never plan from rclone's caches
        except PlacetError as e:
            log.warning("could not clear rclone's caches before planning: %s", e.message)
        pair = Pair(str(folder.root.path), folder.rel, ctx.drive_spec, remote)
        if progress is not None:
            progress.phase = "planning"
        p, generation, missing = self._merge(
            folder, drive, remote, pair, ci=ci, digest_type=dtype, include_hidden=include_hidden,
            allow_empty_side=allow_empty_side, progress=progress,
        )  # fmt: skip
        options = {"include_hidden": include_hidden, "allow_empty_side": allow_empty_side}
        meta = {"digest_type": dtype, "remote_folder_missing": missing}
        fps = (p.plan.local_fingerprint, p.plan.remote_fingerprint)
        stored = self.data.find_plan(
            pair=pair, options=options, fingerprints=fps, baseline_generation=generation,
            meta=meta,
        )  # fmt: skip
        if stored is None:
            # Transfers of remote files without digests: bound to the bytes read now.
            bound = bind_content(p.plan, drive, remote, budget=self.read_budget, progress=progress)
            stored = self.data.save_plan(
                pair=pair,
                root_name=folder.root.name,
                options=options,
                plan=bound,
                baseline_generation=generation,
                meta=meta,
                skips=p.skips,
            )
        self._remember(stored)
        return stored

    def _merge(
        self,
        folder: Folder,
        drive: Drive,
        remote: str,
        pair: Pair,
        *,
        ci: bool,
        digest_type: str | None,
        include_hidden: bool,
        allow_empty_side: bool,
        progress: Progress | None,
    ) -> tuple[_Merged, int, bool]:
        """Merge the local folder and the remote one folder by folder against the
        baseline (`placet.sync.march`): (the plan and its packed skips, the baseline's
        generation, whether the remote folder is missing)."""
        base, count, generation, exact = baseline_side(self.data, pair, case_insensitive=ci)
        cache = _DeferredWrites(self.data, background=True)
        pl = Classifier(drive.capabilities())
        skips = SkipPacker(exact if exact is not None else pl.base.get)
        pl.on_skip = skips.skip
        tree: LocalTree | None = None
        listing: RemoteTree | None = None
        before = drive.soft_memory_limit(RCD_MEMORY_LIMIT)
        try:
            tree = self._tree(
                folder, cache, digest_type=digest_type, include_hidden=include_hidden,
                progress=progress,
            )  # fmt: skip
            listing = RemoteTree(self.remote, drive, remote, case_insensitive=ci,
                                 include_hidden=include_hidden, progress=progress)  # fmt: skip
            march = March(pl, tree, listing, base, include_hidden=include_hidden,
                          entry_cap=self.settings.plan_entry_cap)  # fmt: skip
            march.run(baseline_entries=count, allow_empty_side=allow_empty_side)
        finally:
            if listing is not None:
                listing.finish()
            if before is not None:
                drive.soft_memory_limit(before)
            if tree is not None:
                tree.close()
                self._walked(tree, cache)
        plan = assemble(pl, march.local_fp.hexdigest(), march.remote_fp.hexdigest())
        return _Merged(plan, skips), generation, listing.missing

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


_TYPES = frozenset(DIGEST_PREFERENCE)


def _changes_baseline(row: SkipRow, b: BaselineEntry | None) -> bool:
    return (
        b is None or (b.sha256, b.remote_digest_type, b.remote_digest, b.size, b.mtime) != row[1:]
    )


class SkipPacker(RowPacker):
    """The plan's verified skips packed as it classifies (`plan`'s `on_skip`): the
    rows `skip_row` gives where they differ from `baseline` (a mapping, or the lookup
    of an NFC path), so a plan of
    1,000,000 equal files holds neither a report nor a row per file, only the packed
    blob (`SyncData.save_plan` stores it as is)."""

    def __init__(
        self,
        baseline: Mapping[str, BaselineEntry] | Callable[[str], BaselineEntry | None],
    ) -> None:
        super().__init__()
        self.get = baseline.get if isinstance(baseline, Mapping) else baseline

    def skip(self, path: str, lo: LocalEntry, rem: RemoteEntry, dtype: str | None) -> None:
        d = rem.digests
        if dtype is not None and type(d) is OneDigest and d.value and d.digest_type in _TYPES:
            # `skip_row` inline for the usual skip: two files, one listed digest.
            digest = d.value if d.value.islower() else d.value.lower()
            row: SkipRow = (path, lo.sha256, d.digest_type, digest, rem.size, rem.mtime)
        else:
            got = skip_row(path, lo, rem, dtype)
            if got is None:
                return
            row = got
        if _changes_baseline(row, self.get(path)):
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
