"""Remote folders whose names placet refuses to pass to rclone (a ':', a leading '-')
are read from one recursive listing of their parent, however many of them it holds:
each refused sibling's rows come from that listing, never from another of it."""

from __future__ import annotations

from placet.sync.service import SyncService
from tests.support.rig import Rig
from tests.sync.test_service import _WatchedDrive


def test_refused_sibling_folders_are_read_from_one_listing_of_their_parent(rig: Rig) -> None:
    assert rig.remote_dir is not None
    want = set()
    for i in range(12):
        for rel in (f"x:{i:02d}/f.txt", f"x:{i:02d}/in/g.txt", f"-y{i:02d}/h.txt"):
            p = rig.remote_dir / "t" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(rel)
            want.add(rel)
    (rig.remote_dir / "t" / "ok").mkdir()
    (rig.remote_dir / "t" / "ok" / "k.txt").write_text("k")
    want.add("ok/k.txt")
    (rig.remote_dir / "t" / "x:empty").mkdir()
    svc = SyncService(rig.store, rig.settings)
    drive = _WatchedDrive(rig.drive)
    got, _ = svc.remote_listing(drive, "t")  # type: ignore[arg-type]
    assert {e.path for e in got if e.kind == "file"} == want
    assert "x:empty" in {e.path for e in got if e.kind == "dir"}
    assert drive.recursive == 1
