"""A tree deeper than Python's recursion limit plans: the folder-by-folder merge and the
remote listing walk it on a stack of folders, through the pure planner and through the
service on a local-folder drive listed by rclone."""

from __future__ import annotations

from placet.sync import plan
from placet.sync.entries import PlanCapabilities
from placet.sync.service import SyncService
from tests.support.clocks import ScanClock
from tests.support.listings import L, R
from tests.support.rig import Rig

DEPTH = 600


def _chain(depth: int) -> list[str]:
    return ["/".join(["d"] * (n + 1)) for n in range(depth)]


def test_a_remote_tree_600_folders_deep_plans_without_recursion() -> None:
    folders = _chain(DEPTH)
    remote = [R(p, kind="dir") for p in folders] + [R(folders[-1] + "/f.txt", "x")]
    local = [L(p, None, kind="dir") for p in folders[:3]]
    caps = PlanCapabilities(hash_types=("sha1",), modtime_precision_ns=1)
    got = plan(local, remote, {}, caps)
    assert got.summary["skip"] == DEPTH and got.summary["skipped_special"] == 1


def test_the_service_lists_and_plans_a_remote_tree_600_folders_deep(rig: Rig) -> None:
    assert rig.remote_dir is not None
    deepest = rig.remote_dir.joinpath(*["d"] * DEPTH)
    deepest.mkdir(parents=True)
    (deepest / "f.txt").write_text("x")
    clock = ScanClock()
    clock.settle()
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)
    listed, missing = svc.remote_listing(rig.drive, "")
    assert not missing and len(listed) == DEPTH + 1
    folder = svc.folder(rig.ctx, "", None)
    got = svc.make_plan(rig.ctx, folder, "", include_hidden=False, allow_empty_side=False)
    assert got.summary["skip"] == DEPTH and got.summary["skipped_special"] == 1
    (deep,) = [r for r in got.plan.reports if r.kind == "skipped_special"]
    assert deep.path.endswith("/f.txt") and "levels deep" in deep.detail
