"""One string object for what both listings say alike (`placet.sync.sharing`): equal
paths and digests of a file on both sides become the local entry's objects, in the
remote entries and in the remote digest cache's in-memory rows; nothing unequal (not
even a case-insensitive match) is swapped, and every value stays what it was."""

from __future__ import annotations

from placet.config import Settings
from placet.store import open_store
from placet.sync.entries import LocalEntry, OneDigest, PlanCapabilities, RemoteEntry
from placet.sync.listings import read_listings
from placet.sync.sharing import share_equal_strings
from placet.sync.stored import SyncData
from tests.support.clocks import ScanClock
from tests.support.rig import Rig


def _fresh(s: str) -> str:
    """An equal string that is another object."""
    return "".join(list(s))


def test_equal_paths_and_digests_become_the_local_objects(settings: Settings) -> None:
    sha_a, sha_b = "a" * 64, "b" * 64
    local = [
        LocalEntry("d", "d", "dir"),
        LocalEntry("d/a.txt", "d/a.txt", "file", 3, 1, sha_a, "sha256", sha_a, True),
        LocalEntry("d/b.txt", "d/b.txt", "file", 3, 1, sha_b, "sha256", sha_b, True),
        LocalEntry("d/c.txt", "d/c.txt", "file", 3, 1, sha_a, "sha256", sha_a, True),
    ]
    remote = [
        RemoteEntry(_fresh("d"), "dir"),
        RemoteEntry(_fresh("d/a.txt"), "file", 3, "m", OneDigest("sha256", _fresh(sha_a))),
        RemoteEntry(_fresh("d/b.txt"), "file", 3, "m", OneDigest("sha256", sha_b.upper())),
        RemoteEntry(_fresh("d/c.txt"), "file", 3, "m", OneDigest("md5", "c" * 32)),
    ]
    before = [r.to_dict() for r in remote]
    caps = PlanCapabilities(hash_types=("sha256",))
    listings = read_listings(local, remote, caps, entry_cap=10)
    data = SyncData(open_store(settings))
    rows = [(f"up/{r.path}", 3, "m", r.digests[next(iter(r.digests))]) for r in remote[1:]]
    data.put_remote_digests("spec:", "sha256", rows)
    assert dict(data.remote_digests("spec:", "sha256"))  # the in-memory copy exists

    shared = share_equal_strings(listings.both_files(), "up/")
    data.share_remote_digests("spec:", "sha256", shared)

    assert [r.to_dict() for r in remote] == before  # the same values
    a, b, c = remote[1:]
    assert a.path is local[1].raw_path and a.digests["sha256"] is sha_a
    assert b.path is local[2].raw_path  # equal path shared, digest differs in case: kept
    assert b.digests["sha256"] == sha_b.upper()
    assert c.digests["md5"] == "c" * 32
    cache = data.remote_digests("spec:", "sha256")
    assert cache["up/d/a.txt"] == (3, "m", sha_a) and cache["up/d/a.txt"][2] is sha_a
    assert cache["up/d/b.txt"][2] == sha_b.upper()


def test_read_listings_with_share_points_remote_entries_at_local_strings() -> None:
    sha = "c" * 64
    local = [LocalEntry("x.txt", "x.txt", "file", 3, 1, sha, "sha256", sha, True)]
    remote = [RemoteEntry(_fresh("x.txt"), "file", 3, "m", OneDigest("sha256", _fresh(sha)))]
    caps = PlanCapabilities(hash_types=("sha256",))
    plain = read_listings(local, remote, caps, entry_cap=10)
    assert remote[0].path is not local[0].raw_path
    shared = read_listings(local, remote, caps, entry_cap=10, share=True)
    assert remote[0].path is local[0].raw_path and remote[0].digests["sha256"] is sha
    assert shared.remote_fingerprint == plain.remote_fingerprint


def test_equal_sizes_become_the_local_int() -> None:
    sha = "d" * 64
    size, other = int("100000"), int("100000")  # equal ints, two objects
    assert size is not other
    local = [LocalEntry("x.txt", "x.txt", "file", size, 1, sha, "sha256", sha, True),
             LocalEntry("y.txt", "y.txt", "file", size, 1, sha, "sha256", sha, True)]  # fmt: skip
    remote = [RemoteEntry("x.txt", "file", other, "m", OneDigest("sha256", sha)),
              RemoteEntry("y.txt", "file", 99_999, "m", OneDigest("sha256", sha))]  # fmt: skip
    read_listings(local, remote, PlanCapabilities(hash_types=("sha256",)), share=True)
    assert remote[0].size is size
    assert remote[1].size == 99_999  # unequal: kept


def test_the_remote_listing_takes_local_strings_as_it_decodes(rig: Rig) -> None:
    """A piece of the remote listing (a top-level folder's tree) is decoded once the
    local walk is past that folder, and each of its files takes the local entry's equal
    path, size and digest objects there and then (cold: digests from rclone; warm: from
    the remote digest cache); the values are those of a listing made alone."""
    import shutil

    from placet.sync.service import SyncService

    assert rig.remote_dir is not None
    for d in ("a", "b", "c/deep", "only-here"):
        for i in range(3):
            rig.write(f"{d}/f{i}.txt", f"{d} {i} ".encode() * 40)
    rig.write("top.txt", b"top\n")
    for d in ("a", "b", "c"):
        shutil.copytree(rig.local(d), rig.remote_dir / d)
    (rig.remote_dir / "b" / "f1.txt").write_bytes(b"changed there\n")
    (rig.remote_dir / "only-there").mkdir()
    (rig.remote_dir / "only-there" / "g.txt").write_bytes(b"g\n")
    clock = ScanClock()
    clock.settle()  # past the racily-clean window
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    folder = svc.folder(rig.ctx, "", None)
    for run in ("cold", "warm"):
        pending = svc.remote.begin(rig.drive, "")
        idx = svc.index(folder, digest_type="sha256", include_hidden=False,
                        between=pending.pump, folder_done=pending.local_done)  # fmt: skip
        got, _ = pending.finish()
        local = {e.raw_path: e for e in idx.entries}
        alone, _ = svc.remote_listing(rig.drive, "")
        assert sorted(e.to_dict()["path"] for e in got) == sorted(e.path for e in alone)
        assert {e.path: e.to_dict() for e in got} == {e.path: e.to_dict() for e in alone}, run
        shared = 0
        for r in got:
            lo = local.get(r.path)
            if r.kind != "file" or lo is None or "/" not in r.path:
                continue
            assert r.path is lo.raw_path, (run, r.path)
            if r.path != "b/f1.txt":
                assert r.size is lo.size and r.digests["sha256"] is lo.sha256, (run, r.path)
                shared += 1
            else:
                assert r.digests["sha256"] != lo.sha256 and r.size != lo.size
        assert shared == 8, run
