"""The sync service end to end in one process: real store, real rclone `local` remote,
real indexer and executor. Plans are stored and reused, warm re-plans hash nothing (the
counters are the proof), baselines turn a conflict into a fast-forward, and the plan's
edges (missing remote folder, empty side, decisions) behave as docs/design.md section 7 says.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import weakref
from pathlib import Path

import pytest

from placet.errors import NotFound, UsageError
from placet.sync import remote_tree
from placet.sync.jobs import Progress
from placet.sync.model import EmptySideRefused
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService, root_key
from placet.sync.tables import Pair
from tests.support.clocks import ScanClock
from tests.support.db import raw_db
from tests.support.rig import Rig


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def plan(svc: SyncService, rig: Rig, local: str = "", remote: str = "", **kw: bool):  # type: ignore[no-untyped-def]
    folder = svc.folder(rig.ctx, local, None)
    return svc.make_plan(
        rig.ctx,
        folder,
        remote,
        include_hidden=kw.get("include_hidden", False),
        allow_empty_side=kw.get("allow_empty_side", False),
    )


def kinds(sp) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in sp.summary.items() if v and not k.endswith("_bytes")}


@pytest.mark.usefixtures("store_backend")
def test_first_sync_then_warm_replan_hashes_nothing(rig: Rig) -> None:
    """On both stores: the digest cache's root key is text PostgreSQL can hold (a NUL-joined
    key failed every plan there)."""
    assert rig.remote_dir is not None
    for i in range(20):
        rig.write(f"a/f{i}.txt", f"file {i}\n".encode())
    rig.write("top.txt", b"top\n")
    rig.write(".hidden", b"not synced unless asked\n")
    (rig.remote_dir / "only-remote.txt").write_bytes(b"from the drive\n")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)

    first = plan(svc, rig)
    assert kinds(first) == {"upload": 21, "mkdir": 1, "download": 1}
    assert svc.local_files_hashed == 21  # .hidden left out
    assert svc.remote_files_hashed == 1

    rec, created = propose_sync(svc, rig.ctx, plan_id=first.id, decisions={}, reason="first")
    assert created and rec.kind == "sync"
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(rec.id)
    assert sha(rig.remote_dir / "a/f7.txt") == sha(rig.local("a/f7.txt"))
    assert rig.local("only-remote.txt").read_bytes() == b"from the drive\n"
    assert not (rig.remote_dir / ".hidden").exists()

    clock.settle()
    hashed = svc.local_files_hashed, svc.remote_files_hashed
    second = plan(svc, rig)
    assert kinds(second) == {"skip": 23}  # 22 files and the folder a/
    # Only the file the sync downloaded was new to the local cache; the remote cache
    # holds the digests the sync recorded for what it uploaded.
    fresh_local, fresh_remote = (
        svc.local_files_hashed - hashed[0],
        svc.remote_files_hashed - hashed[1],
    )
    assert (fresh_local, fresh_remote) == (1, 0)

    hashed = svc.local_files_hashed, svc.remote_files_hashed
    third = plan(svc, rig)
    assert (svc.local_files_hashed, svc.remote_files_hashed) == hashed  # warm: nothing read
    assert third.id == second.id and third.reused  # same inputs, same stored plan

    # A new process (fresh service, same database): the persistent caches are warm too.
    other = SyncService(rig.store, rig.settings, clock_ns=clock)
    again = plan(other, rig)
    assert (other.local_files_hashed, other.remote_files_hashed) == (0, 0)
    assert again.id == second.id


def test_conflict_then_fast_forward_once_a_baseline_exists(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("notes.md", b"v1\n")
    rig.write("same.txt", b"same\n")
    (rig.remote_dir / "notes.md").write_bytes(b"remote v1\n")
    (rig.remote_dir / "same.txt").write_bytes(b"same\n")
    svc = SyncService(rig.store, rig.settings)

    sp = plan(svc, rig)
    assert kinds(sp) == {"conflict": 1, "skip": 1}
    (c,) = sp.plan.conflicts
    assert c.path == "notes.md" and c.conflict_kind == "content_differs"
    with pytest.raises(UsageError) as e:
        propose_sync(svc, rig.ctx, plan_id=sp.id, decisions={}, reason="undecided")
    assert e.value.error_code == "undecided_conflict"
    with pytest.raises(UsageError) as e:
        both = {"notes.md": "keep_local", "same.txt": "skip"}
        propose_sync(svc, rig.ctx, plan_id=sp.id, decisions=both, reason="x")
    assert e.value.error_code == "decision_not_conflict"
    assert rig.store.list() == []  # refused as a whole: nothing stored

    rec, _ = propose_sync(svc, rig.ctx, plan_id=sp.id, decisions={"notes.md": "keep_local"},
                          reason="mine wins")  # fmt: skip
    assert rig.run(rec).status == "succeeded"
    assert (rig.remote_dir / "notes.md").read_bytes() == b"v1\n"
    base, generation = svc.data.baseline(Pair(str(rig.root.path), "", rig.drive.spec, ""))
    assert generation >= 1 and set(base) == {"notes.md", "same.txt"}  # op + verified skip
    assert base["notes.md"].sha256 == hashlib.sha256(b"v1\n").hexdigest()

    rig.write("notes.md", b"v2, edited here\n")
    sp2 = plan(svc, rig)
    assert kinds(sp2) == {"upload_revision": 1, "skip": 1}
    (rig.remote_dir / "same.txt").write_bytes(b"changed on the drive\n")
    sp3 = plan(svc, rig)
    assert kinds(sp3) == {"upload_revision": 1, "download": 1}


def test_missing_remote_folder_is_created_first(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("src/a.txt", b"a\n")
    rig.write("src/sub/b.txt", b"b\n")
    svc = SyncService(rig.store, rig.settings)
    sp = plan(svc, rig, "src", "backup/src")
    assert sp.meta["remote_folder_missing"] is True
    rec, _ = propose_sync(svc, rig.ctx, plan_id=sp.id, decisions={}, reason="back up")
    kinds_in_order = [(o["kind"], o["remote_path"]) for o in rig.store.ops(rec.id)]
    assert kinds_in_order[0] == ("mkdir", "backup/src")
    assert rig.run(rec).status == "succeeded"
    assert (rig.remote_dir / "backup/src/sub/b.txt").read_bytes() == b"b\n"


def test_empty_side_with_a_baseline_is_refused(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("d/a.txt", b"a\n")
    svc = SyncService(rig.store, rig.settings)
    sp = plan(svc, rig, "d", "d")
    rec, _ = propose_sync(svc, rig.ctx, plan_id=sp.id, decisions={}, reason="sync")
    assert rig.run(rec).status == "succeeded"
    for p in (rig.remote_dir / "d").iterdir():
        p.unlink()
    with pytest.raises(EmptySideRefused) as e:
        plan(svc, rig, "d", "d")
    assert e.value.error_code == "empty_side"
    allowed = plan(svc, rig, "d", "d", allow_empty_side=True)
    assert kinds(allowed) == {"deleted_remote": 1}  # reported, never re-uploaded


def test_pruned_or_unknown_plan_is_not_found(rig: Rig) -> None:
    svc = SyncService(rig.store, rig.settings)
    with pytest.raises(NotFound):
        propose_sync(svc, rig.ctx, plan_id=999, decisions={}, reason="gone")


def test_nothing_to_do_is_refused(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("x.txt", b"x\n")
    (rig.remote_dir / "x.txt").write_bytes(b"x\n")
    svc = SyncService(rig.store, rig.settings)
    sp = plan(svc, rig)
    rec, _ = propose_sync(svc, rig.ctx, plan_id=sp.id, decisions={}, reason="record")
    assert rec.evidence["verified_skips"] == 1  # the first time it records the baseline
    assert rig.run(rec).status == "succeeded"
    again = plan(svc, rig)
    with pytest.raises(UsageError) as e:
        propose_sync(svc, rig.ctx, plan_id=again.id, decisions={}, reason="again")
    assert e.value.error_code == "nothing_to_do"
    assert os.listdir(rig.remote_dir) == ["x.txt"]


def test_cold_remote_listing_by_subfolders_matches_one_hashed_listing(rig: Rig) -> None:
    assert rig.remote_dir is not None
    for d in ("one", "two", "three/deep"):
        for i in range(3):
            p = rig.remote_dir / "pair" / d / f"f{i}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"{d} {i}\n")
    (rig.remote_dir / "pair" / "top.txt").write_text("top\n")
    svc = SyncService(rig.store, rig.settings)
    got, missing = svc.remote_listing(rig.drive, "pair")
    assert not missing and svc.remote_files_hashed == 10
    want = {e.path: e for e in rig.drive.list_tree("pair", include_digest=True)}
    assert {e.path for e in got} == {p.removeprefix("pair/") for p in want}
    for e in got:
        w = want["pair/" + e.path]
        assert (e.kind == "dir") == w.is_dir
        if not w.is_dir:
            assert dict(e.digests) == w.digests and w.digests  # every file hashed, alike
    again, _ = svc.remote_listing(rig.drive, "pair")  # warm: from the remote digest cache
    assert svc.remote_files_hashed == 10
    assert sorted((e.path, dict(e.digests)) for e in again) == sorted(
        (e.path, dict(e.digests)) for e in got
    )


class _Rows(list):  # type: ignore[type-arg]
    """A folder's rows as `folders_from_raw` decoded them, trackable by a weak
    reference."""


class _WatchedDrive:
    """`rig.drive` itself, noting at each listing request the most folder listings
    alive at once (what the remote side holds of the tree at its worst), and whether any
    recursive listing was asked for."""

    def __init__(self, drive: object) -> None:
        self.drive, self.alive, self.most, self.recursive = drive, 0, 0, 0
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> object:
        return getattr(self.drive, name)

    def _gone(self) -> None:
        with self.lock:
            self.alive -= 1

    def list_rows(
        self, path: str, *, recurse: bool = True, digest_type: str | None = None
    ) -> object:
        self.recursive += recurse
        return self.drive.list_rows(path, recurse=recurse, digest_type=digest_type)  # type: ignore[attr-defined]

    def folders_from_raw(self, raw: bytes, paths: list[str], **kw: object) -> list[object]:
        got = self.drive.folders_from_raw(raw, paths, **kw)  # type: ignore[attr-defined]
        out = [_Rows(r) if isinstance(r, list) else r for r in got]
        with self.lock:
            for r in out:
                if isinstance(r, _Rows):
                    weakref.finalize(r, self._gone)
                    self.alive += 1
            self.most = max(self.most, self.alive)
        return out


@pytest.mark.parametrize("warm", [False, True])
def test_a_remote_listing_holds_a_few_folders_not_the_tree(
    rig: Rig, warm: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each folder is listed on its own (batches of non-recursive listings, never a
    recursive one), and only a few rows ahead of the folder the merge reads: 40 folders
    are never held at once."""
    assert rig.remote_dir is not None
    for i in range(40):
        for j in range(5):
            p = rig.remote_dir / "t" / f"d{i:02d}" / f"f{j}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"{i} {j}\n")
    monkeypatch.setattr(remote_tree, "AHEAD_ROWS", 10)
    monkeypatch.setattr(remote_tree, "BATCH_ROWS", 10)
    svc = SyncService(rig.store, rig.settings)
    if warm:
        svc.remote_listing(rig.drive, "t")  # the remote digest cache filled
    drive = _WatchedDrive(rig.drive)
    got, _ = svc.remote_listing(drive, "t")  # type: ignore[arg-type]
    want = sorted(f"d{i:02d}/f{j}.txt" for i in range(40) for j in range(5))
    assert sorted(e.path for e in got if e.kind == "file") == want
    assert all(e.digests for e in got if e.kind == "file")
    assert drive.recursive == 0
    # The folder being read, a batch listed ahead (each of 5 rows), one in flight.
    assert 1 <= drive.most <= 8, drive.most


def test_many_remote_misses_in_a_folder_are_hashed_by_one_listing_of_it(rig: Rig) -> None:
    """More than `BULK_MISSES` changed remote files in a folder (and a tenth of them):
    one hashed listing of the folder gives each its digest of the bytes now."""
    from placet.sync.remote import BULK_MISSES

    assert rig.remote_dir is not None
    n = BULK_MISSES + 44
    for i in range(n):
        p = rig.remote_dir / "m" / "d00" / f"f{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"old {i}\n")
    svc = SyncService(rig.store, rig.settings)
    svc.remote_listing(rig.drive, "m")
    assert svc.remote_files_hashed == n
    later = time.time() + 10
    for i in range(n):
        p = rig.remote_dir / "m" / "d00" / f"f{i}.txt"
        p.write_text(f"new {i}!\n")
        os.utime(p, (later, later))
    got, _ = svc.remote_listing(rig.drive, "m")
    assert svc.remote_files_hashed == 2 * n
    files = {e.path: e.digests["sha256"] for e in got if e.kind == "file"}
    assert len(files) == n
    for i in (0, 1, n - 1):
        want = hashlib.sha256(f"new {i}!\n".encode()).hexdigest()
        assert files[f"d00/f{i}.txt"] == want


def test_digest_cache_drops_rows_of_deleted_files(rig: Rig) -> None:
    for i in range(5):
        rig.write(f"g/f{i}.txt", f"{i}\n".encode())
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    folder = svc.folder(rig.ctx, "g", None)
    svc.index(folder, digest_type="sha256", include_hidden=False)
    svc.index(folder, digest_type="sha256", include_hidden=False)  # warm: layer loaded
    rig.local("g/f3.txt").unlink()
    svc.index(folder, digest_type="sha256", include_hidden=False)
    fresh = SyncService(rig.store, rig.settings, clock_ns=clock)  # read back from the database
    rows = fresh.data.get_under(root_key(folder.root), "g")
    assert sorted(rows) == ["g/f0.txt", "g/f1.txt", "g/f2.txt", "g/f4.txt"]


def test_the_drive_shares_the_persistent_remote_digest_cache(rig: Rig) -> None:
    """After a plan, the drive's own listings with digests read the remote digest cache
    the plan filled (one cache per process), so they hash nothing already known."""
    assert rig.remote_dir is not None
    for i in range(3):
        (rig.remote_dir / f"r{i}.txt").write_bytes(f"remote {i}\n".encode())
    svc = SyncService(rig.store, rig.settings)
    plan(svc, rig)
    assert svc.remote_files_hashed == 3
    spec = rig.drive.spec
    size, mtime, digest = svc.data.remote_digests(spec, "sha256")["r1.txt"]
    assert digest == hashlib.sha256(b"remote 1\n").hexdigest()
    # A digest only the cache could know: the drive's listing must take it from there.
    svc.data.put_remote_digests(spec, "sha256", [("r1.txt", size, mtime, "e" * 64)])
    entries, _ = rig.drive.list_folder("", include_digest=True)
    assert {e.name: e.digests["sha256"] for e in entries}["r1.txt"] == "e" * 64


def test_caches_too_big_to_keep_are_read_by_each_plan_and_consumed(rig: Rig) -> None:
    """Above `memory_rows` neither digest cache keeps an in-memory copy: each plan reads
    the rows and its index and listing take them as they go; a warm plan still hashes
    nothing, and the rows of deleted files are dropped, those of hidden files (not
    listed) kept."""
    for i in range(12):
        rig.write(f"b/f{i}.txt", f"file {i}\n".encode())
    rig.write(".hidden", b"cached only when listed\n")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    svc.data.memory_rows = 5
    key = root_key(svc.folder(rig.ctx, "", None).root)
    svc.index(svc.folder(rig.ctx, "", None), digest_type="sha256", include_hidden=True)
    first = plan(svc, rig)
    assert kinds(first) == {"upload": 12, "mkdir": 1}
    assert svc.data.loaded_local(key) is None  # too big to keep
    assert rig.remote_dir is not None
    (rig.remote_dir / "r").mkdir()
    for i in range(8):
        (rig.remote_dir / "r" / f"g{i}.txt").write_bytes(f"remote {i}\n".encode())
    clock.settle()
    plan(svc, rig)  # a cold remote listing: 8 digests written, too many to keep
    hashed = svc.local_files_hashed, svc.remote_files_hashed
    warm = plan(svc, rig)
    assert (svc.local_files_hashed, svc.remote_files_hashed) == hashed  # read, not hashed
    assert warm.reused
    rig.local("b/f3.txt").unlink()
    plan(svc, rig)
    rows = SyncService(rig.store, rig.settings, clock_ns=clock).data.get_under(key, "")
    assert sorted(rows) == sorted([".hidden"] + [f"b/f{i}.txt" for i in range(12) if i != 3])


def test_a_cache_too_big_to_keep_is_read_a_folder_at_a_time(rig: Rig) -> None:
    """Above `memory_rows` a warm index reads the local digest cache a folder at a time
    as it lists it: it still hashes nothing, and the rows of files gone since (in a
    folder, a whole folder, at the top) are dropped, those of hidden folders (not
    entered) kept; "a-b" sorts before "a/" in SQLite and after "a" in the walk, and
    neither read takes the other's rows."""
    names = ["a/f0.txt", "a/f1.txt", "a-b/f.txt", "b/c/f0.txt", "b/c/f1.txt", "top.txt",
             "z/f.txt", ".hid/x.txt", "a0.txt"]  # fmt: skip
    for n in names:
        rig.write(n, n.encode())
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    svc.data.memory_rows = 3
    folder = svc.folder(rig.ctx, "", None)
    key = root_key(folder.root)
    svc.index(folder, digest_type="sha256", include_hidden=True)
    assert svc.local_files_hashed == len(names)
    assert svc.data.local_folders(key) is not None  # too big to keep: read by folder
    warm = svc.index(folder, digest_type="sha256", include_hidden=False)
    assert svc.local_files_hashed == len(names) and warm.cache_hits == len(names) - 1
    for gone in ("a/f1.txt", "z/f.txt", "top.txt"):
        rig.local(gone).unlink()
    rig.local("z").rmdir()
    again = svc.index(folder, digest_type="sha256", include_hidden=False)
    assert svc.local_files_hashed == len(names) and again.cache_hits == len(names) - 4
    rows = SyncService(rig.store, rig.settings, clock_ns=clock).data.get_under(key, "")
    assert sorted(rows) == sorted(set(names) - {"a/f1.txt", "z/f.txt", "top.txt"})
    sub = svc.index(svc.folder(rig.ctx, "b", None), digest_type="sha256", include_hidden=False)
    assert sub.cache_hits == 2 and svc.local_files_hashed == len(names)


def test_a_plan_returns_with_its_digests_stored(rig: Rig) -> None:
    """The digest cache rows a plan's walk wrote beside it are in the database when it
    returns."""
    for i in range(3):
        rig.write(f"f{i}.txt", f"file {i}\n".encode())
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    with raw_db(rig.settings) as db:
        (count,) = db.execute("SELECT count(*) FROM sync_digest_cache").fetchone()
    assert count == 3


def test_a_plan_lists_with_rcds_memory_limited_and_gives_the_limit_back(rig: Rig) -> None:
    """While a plan lists, rcd's soft memory limit is `RCD_MEMORY_LIMIT` (its heap grew
    past its live data while hashing); after, what it was (none: 2**62 bytes, as
    rclone's float64 numbers allow)."""
    from placet.sync.service import RCD_MEMORY_LIMIT

    rig.write("a.txt", b"a\n")
    before = rig.drive.soft_memory_limit(-1)
    assert before is not None and before > RCD_MEMORY_LIMIT
    during: list[int | None] = []

    class Watched(Progress):
        def __setattr__(self, name: str, value: object) -> None:
            if name == "phase" and value == "listing the remote":
                during.append(rig.drive.soft_memory_limit(-1))
            super().__setattr__(name, value)

    svc = SyncService(rig.store, rig.settings, clock_ns=ScanClock())
    svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                  allow_empty_side=False, progress=Watched())  # fmt: skip
    assert during == [RCD_MEMORY_LIMIT]
    assert rig.drive.soft_memory_limit(-1) == min(before, 1 << 62)  # none, in effect
