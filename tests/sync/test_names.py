"""Names placet cannot use, on either side, never stop a plan and never become ops.

A remote or local entry whose name the executor would refuse (a `:`, a leading `-`, a
control character, a Windows device name, placet's reserved `.placet-tmp-` prefix) is
reported `skipped_special` with the refusal, and everything else is planned as usual.
Real folders, real rclone `local` remote, real executor: the plan's ops all run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from placet.drive import RcloneDrive
from placet.sync import PlanCapabilities, plan
from placet.sync.model import SyncPlan
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from placet.sync.tables import StoredPlan
from tests.support.clocks import ScanClock
from tests.support.listings import L, R, classify
from tests.support.rig import Rig

SHA256 = PlanCapabilities(hash_types=("sha256",))


def _plan(svc: SyncService, rig: Rig) -> StoredPlan:
    folder = svc.folder(rig.ctx, "", None)
    return svc.make_plan(rig.ctx, folder, "", include_hidden=True, allow_empty_side=False)


def _reports(p: SyncPlan, kind: str) -> dict[str, str]:
    return {r.path: r.detail for r in p.reports if r.kind == kind}


def _op_paths(p: SyncPlan) -> set[str]:
    return {o.remote_path for o in p.ops} | {o.local_path for o in p.ops}


# ---- the pure planner ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "remote", "path", "why"),
    [
        ([L("a:b", "x")], [], "a:b", "':'"),
        ([L("-y", "x")], [], "-y", "starts with '-'"),
        ([L("bell\x07", "x")], [], "bell\x07", "control"),
        ([L(".placet-tmp-q", "x")], [], ".placet-tmp-q", ".placet-tmp-"),
        ([L("nul.txt", "x")], [], "nul.txt", "device name"),
        ([], [R("c:d", "x", types=("sha256",))], "c:d", "':'"),
        ([], [R("-z", "x", types=("sha256",))], "-z", "starts with '-'"),
        ([], [R("con.txt", "x", types=("sha256",))], "con.txt", "device name"),
        ([], [R("back\\slash", "x", types=("sha256",))], "back\\slash", "backslash"),
        ([], [R("b\ufffdd.txt", "x", types=("sha256",))], "b\ufffdd.txt", "U+FFFD"),
        ([L("x\ufffdy.txt", "x")], [], "x\ufffdy.txt", "U+FFFD"),
    ],
)
def test_planner_reports_unusable_names_instead_of_ops(
    local: list, remote: list, path: str, why: str
) -> None:
    p = plan(
        [*local, L("ok.txt", "fine")],
        [*remote, R("ok2.txt", "there", types=("sha256",))],
        {},
        SHA256,
        include_hidden=True,
    )
    got = classify(p)
    assert got[path] == "skipped_special"
    assert why in _reports(p, "skipped_special")[path]
    assert _reports(p, "skipped_special")[path].startswith("not synced: ")
    assert got["ok.txt"] == "upload" and got["ok2.txt"] == "download"
    assert path not in _op_paths(p)


def test_planner_unusable_folder_blocks_its_uploads_and_conflicts() -> None:
    local = [
        L("-dir", kind="dir"),
        L("-dir/in.txt", "new"),
        L("a:b.txt", "mine"),
        L("ok", kind="dir"),
        L("ok/f.txt", "f"),
    ]
    remote = [R("a:b.txt", "theirs", types=("sha256",))]  # content differs: a conflict
    p = plan(local, remote, {}, SHA256)
    got = classify(p)
    assert got["-dir"] == got["-dir/in.txt"] == got["a:b.txt"] == "skipped_special"
    assert got["ok"] == "mkdir" and got["ok/f.txt"] == "upload"
    assert not p.conflicts
    assert _op_paths(p) == {"ok", "ok/f.txt"}


def test_equal_files_with_unusable_names_stay_skips() -> None:
    p = plan([L("a:b", "same")], [R("a:b", "same", types=("sha256",))], {}, SHA256)
    assert classify(p) == {"a:b": "skip"}
    assert not p.ops


# ---- the service: real folders, real rclone --------------------------------------------


def test_unusable_remote_and_local_names_do_not_stop_the_plan(rig: Rig) -> None:
    d = rig.remote_dir
    assert d is not None
    for name in ("a:b", "-x", "\x07bell", ".placet-tmp-foo", "ok.txt", "con.txt"):
        (d / name).write_bytes(f"remote {name!r}\n".encode())
    for sub in ("sub", "-dir", "two"):
        (d / sub).mkdir()
        (d / sub / "in.txt").write_bytes(f"in {sub}\n".encode())
    (d / "sub" / "c:d").write_bytes(b"deep\n")
    for name in ("l:m", "-y", "\x07ding", "nul.txt", "mine.txt", ".placet-tmp-bar"):
        rig.write(name, f"local {name!r}\n".encode())
    clock = ScanClock()
    clock.settle()  # past the racily-clean window
    svc = SyncService(rig.store, rig.settings, clock_ns=clock)

    cold = _plan(svc, rig).plan
    special = _reports(cold, "skipped_special")
    for path, why in {
        "a:b": "':'",
        "-x": "starts with '-'",
        "con.txt": "device name",
        "sub/c:d": "':'",
        "-dir/in.txt": "starts with '-'",
        "l:m": "':'",
        "-y": "starts with '-'",
        "\x07ding": "control",
        "nul.txt": "device name",
        ".placet-tmp-bar": ".placet-tmp-",
    }.items():
        assert why in special[path], (path, special.get(path))
    ops = {o.path: o.kind for o in cold.ops}
    # rclone's local backend lists "\x07bell" as "\u2407bell" (its own encoding of a
    # control character), a name placet can use: it is planned like any other.
    assert ops == {
        "ok.txt": "download",
        "\u2407bell": "download",
        "sub/in.txt": "download",
        "two/in.txt": "download",
        "mine.txt": "upload",
    }
    assert not any(".placet-tmp-" in p for p in _op_paths(cold))
    assert "-dir/in.txt" not in ops  # beneath a folder whose name cannot be used

    # Warm, with an unusable remote name changed since: a digest miss, left without a
    # digest instead of failing the listing.
    (d / "a:b").write_bytes(b"changed remote\n")
    stored = _plan(svc, rig)
    warm = stored.plan
    assert _reports(warm, "skipped_special").keys() == special.keys()
    assert {o.path: o.kind for o in warm.ops} == ops

    # Every op the plan proposes runs: the executor refuses none of its names.
    rec, created = propose_sync(svc, rig.ctx, plan_id=stored.id, decisions={}, reason="names")
    assert created
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(rec.id)
    assert (d / "mine.txt").read_bytes() == b"local 'mine.txt'\n"
    assert rig.local("\u2407bell").read_bytes() == b"remote '\\x07bell'\n"
    assert not (d / "l:m").exists() and not (d / "-y").exists()
    assert not rig.local("a:b").exists() and not rig.local("con.txt").exists()


def test_drive_list_with_digests_survives_unusable_names(local_drive: RcloneDrive) -> None:
    root = Path(local_drive.spec)
    for name in ("a:b", "-x", "ok.txt"):
        (root / name).write_bytes(name.encode())
    entries, _ = local_drive.list_folder("", include_digest=True)
    by_name = {e.name: e for e in entries}
    assert set(by_name) == {"a:b", "-x", "ok.txt"}
    assert by_name["ok.txt"].digests.get("sha256")
    os.utime(root / "ok.txt")  # still works on the next (cached) listing
    again, _ = local_drive.list_folder("", include_digest=True)
    assert {e.name for e in again} == {"a:b", "-x", "ok.txt"}


def _not_utf8(folder: Path) -> None:
    """A file named with a byte that is not UTF-8 (rclone lists it as ``b\ufffdd.txt``),
    one named with U+FFFD itself, a folder of the first kind with a file in it, and a
    usable file."""
    root = os.fsencode(folder)
    with open(os.path.join(root, b"b\xe4d.txt"), "wb") as f:
        f.write(b"bad name\n")
    (folder / "x\ufffdy.txt").write_bytes(b"replacement char\n")
    os.mkdir(os.path.join(root, b"d\xe4r"))
    with open(os.path.join(root, b"d\xe4r", b"in.txt"), "wb") as f:
        f.write(b"inside\n")
    (folder / "ok.txt").write_bytes(b"fine\n")


def test_names_not_valid_utf8_are_skipped_and_never_planned(rig: Rig) -> None:
    """A name that is not valid UTF-8 (`b\\xe4d.txt`) lists as `b\ufffdd.txt`, which
    reaches nothing: planned as a download it would fail `stale` and be planned again
    forever, so it is reported `skipped_special`."""
    d = rig.remote_dir
    assert d is not None
    _not_utf8(d)
    svc = SyncService(rig.store, rig.settings)
    p = _plan(svc, rig).plan
    special = _reports(p, "skipped_special")
    for path in ("b\ufffdd.txt", "x\ufffdy.txt", "d\ufffdr/in.txt"):
        assert "U+FFFD" in special[path], (path, special)
    assert {o.path: o.kind for o in p.ops} == {"ok.txt": "download"}


def test_drive_list_with_digests_survives_names_not_valid_utf8(
    local_drive: RcloneDrive,
) -> None:
    """A listing with digests shows `b\ufffdd.txt` without one: asking for its digest
    by that name reaches nothing and would fail the whole listing `not_found`."""
    _not_utf8(Path(local_drive.spec))
    entries, _ = local_drive.list_folder("", include_digest=True)
    by_name = {e.name: e for e in entries}
    assert set(by_name) == {"b\ufffdd.txt", "x\ufffdy.txt", "d\ufffdr", "ok.txt"}
    assert by_name["ok.txt"].digests.get("sha256")
    assert not by_name["b\ufffdd.txt"].digests


def test_the_planner_shortcut_stays_below_every_whole_path_limit() -> None:
    """The planner runs the whole-path checks only past 255 characters or 8 levels
    (`MAX_PLAN_PATH_CHARS`, `MAX_PLAN_DEPTH`); below that the segment checks decide, which
    holds only while every whole-path limit of placet.paths lies beyond them."""
    from placet.paths.local import MAX_LOCAL_DEPTH, MAX_LOCAL_PATH_BYTES, check_local_shape
    from placet.paths.remote import MAX_REMOTE_DEPTH, check_remote_path
    from placet.sync.classify import MAX_PLAN_DEPTH, MAX_PLAN_PATH_CHARS

    assert MAX_LOCAL_PATH_BYTES > 4 * MAX_PLAN_PATH_CHARS  # 4 UTF-8 bytes per character
    assert MAX_LOCAL_DEPTH > MAX_PLAN_DEPTH
    assert MAX_REMOTE_DEPTH > MAX_PLAN_DEPTH
    ok = "/".join(["a" * 31] * 8)  # 255 characters, 8 levels: passes both whole checks
    assert len(ok) == MAX_PLAN_PATH_CHARS and ok.count("/") == MAX_PLAN_DEPTH - 1
    check_local_shape(ok)
    check_remote_path(ok)


def test_long_and_deep_paths_still_get_the_whole_path_checks() -> None:
    deep = "/".join(["d"] * 20) + "/f.txt"  # deeper than the local limit (16)
    p = plan([L(deep, "x"), L("ok.txt", "y")], [], {}, SHA256)
    assert classify(p)[deep] == "skipped_special"
    assert "levels deep" in _reports(p, "skipped_special")[deep]
    assert classify(p)["ok.txt"] == "upload"
