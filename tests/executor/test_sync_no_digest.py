"""A sync on a remote without digests binds its transfers to content.

`rclone serve webdav` on 127.0.0.1 reports no digest, and size and mtime can be put
back after a rewrite. So the plan reads each remote file a download or replacing upload
would touch once and records its SHA-256 in the op's evidence; the executor compares the
bytes it reads, and what the plan could not read is reported `unbound`, never planned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placet.errors import LimitExceeded
from placet.executor import load_plan
from placet.store import ProposalRecord
from placet.sync import plan
from placet.sync.content import ReadBudget
from placet.sync.entries import PlanCapabilities
from placet.sync.model import SyncPlan
from placet.sync.ops import remote_entries_from_drive
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from placet.sync.tables import Pair, StoredPlan
from tests.support.rig import Rig, rewrite_same_size, sha256, temp_names


def _plan(rig: Rig, svc: SyncService | None = None) -> tuple[SyncService, StoredPlan]:
    svc = svc or SyncService(rig.store, rig.settings)
    stored = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    return svc, stored


def _propose(
    rig: Rig, svc: SyncService, stored: StoredPlan, decisions: dict[str, str] | None = None
) -> ProposalRecord:
    rec, created = propose_sync(
        svc, rig.ctx, plan_id=stored.id, decisions=decisions or {}, reason="sync test"
    )
    assert created
    return rec


def _ops(rig: Rig, rec: ProposalRecord) -> list[dict[str, Any]]:
    """The proposal's ops as stored (JSON, as the executor parses them)."""
    return [op.model_dump(mode="json") for op in load_plan(rig.store, rig.store.get(rec.id)).ops]


def _outcomes(rig: Rig, rec: ProposalRecord) -> dict[str, str]:
    return {r.op["remote_path"]: r.outcome for r in rig.store.op_results(rec.id)}


def _remote(rig: Rig) -> Path:
    assert rig.remote_dir is not None
    return rig.remote_dir


def test_a_sync_download_rewritten_after_the_plan_is_stale(webdav_rig: Rig) -> None:
    (_remote(webdav_rig) / "r.txt").write_bytes(b"what the owner saw\n")
    svc, stored = _plan(webdav_rig)
    assert [o.kind for o in stored.plan.ops] == ["download"]
    rec = _propose(webdav_rig, svc, stored)
    (op,) = _ops(webdav_rig, rec)
    ev = op["expected_remote"]
    assert ev["read_by_placet"] is True
    assert (ev["digest_type"], ev["digest"]) == ("sha256", sha256(b"what the owner saw\n"))

    rewrite_same_size(_remote(webdav_rig) / "r.txt", b"what the owner never\n"[:19])
    done = webdav_rig.run(rec)
    assert done.status == "failed"
    assert _outcomes(webdav_rig, rec) == {"r.txt": "stale"}
    assert not webdav_rig.local("r.txt").exists()
    assert temp_names(webdav_rig.root.path) == []


def test_an_honest_sync_download_says_readback(webdav_rig: Rig) -> None:
    (_remote(webdav_rig) / "d").mkdir()
    (_remote(webdav_rig) / "d/r.txt").write_bytes(b"content\n")
    (_remote(webdav_rig) / "s.txt").write_bytes(b"second\n")
    svc, stored = _plan(webdav_rig)
    rec = _propose(webdav_rig, svc, stored)
    done = webdav_rig.run(rec)
    assert done.status == "succeeded"
    details = [r.detail for r in webdav_rig.store.op_results(rec.id)]
    assert [d["verification"] for d in details] == ["readback:sha256"] * 2
    assert webdav_rig.local("d/r.txt").read_bytes() == b"content\n"
    # The baseline took the content's SHA-256: the next plan has nothing to transfer.
    _, again = _plan(webdav_rig, svc)
    assert again.plan.ops == ()


def test_a_sync_replacement_never_overwrites_content_the_owner_did_not_see(
    webdav_rig: Rig,
) -> None:
    webdav_rig.write("t.txt", b"first version\n")
    svc, stored = _plan(webdav_rig)
    assert webdav_rig.run(_propose(webdav_rig, svc, stored)).status == "succeeded"
    webdav_rig.write("t.txt", b"second version, longer\n")
    _, stored = _plan(webdav_rig, svc)
    assert [o.kind for o in stored.plan.ops] == ["upload_revision"]
    rec = _propose(webdav_rig, svc, stored)
    (op,) = _ops(webdav_rig, rec)
    assert op["expected_remote"]["read_by_placet"] is True
    assert op["expected_remote"]["digest"] == sha256(b"first version\n")

    rewrite_same_size(_remote(webdav_rig) / "t.txt", b"never seen it\n")
    done = webdav_rig.run(rec)
    assert done.status == "failed" and _outcomes(webdav_rig, rec) == {"t.txt": "stale"}
    assert (_remote(webdav_rig) / "t.txt").read_bytes() == b"never seen it\n"
    assert temp_names(_remote(webdav_rig)) == []


def test_an_honest_sync_replacement_runs(webdav_rig: Rig) -> None:
    webdav_rig.write("t.txt", b"first version\n")
    svc, stored = _plan(webdav_rig)
    assert webdav_rig.run(_propose(webdav_rig, svc, stored)).status == "succeeded"
    webdav_rig.write("t.txt", b"second version, longer\n")
    _, stored = _plan(webdav_rig, svc)
    rec = _propose(webdav_rig, svc, stored)
    assert webdav_rig.run(rec).status == "succeeded"
    assert (_remote(webdav_rig) / "t.txt").read_bytes() == b"second version, longer\n"


def test_keep_remote_on_a_conflict_is_bound_too(webdav_rig: Rig) -> None:
    webdav_rig.write("c.txt", b"base\n")
    svc, stored = _plan(webdav_rig)
    assert webdav_rig.run(_propose(webdav_rig, svc, stored)).status == "succeeded"
    webdav_rig.write("c.txt", b"edited here\n")
    (_remote(webdav_rig) / "c.txt").write_bytes(b"edited on the remote\n")
    _, stored = _plan(webdav_rig, svc)
    assert stored.plan.content == {"c.txt": sha256(b"edited on the remote\n")}
    rec = _propose(webdav_rig, svc, stored, {"c.txt": "keep_remote"})
    (op,) = _ops(webdav_rig, rec)
    assert op["kind"] == "download" and op["expected_remote"]["read_by_placet"] is True
    rewrite_same_size(_remote(webdav_rig) / "c.txt", b"EDITED ON THE REMOTE\n")
    assert webdav_rig.run(rec).status == "failed"
    assert webdav_rig.local("c.txt").read_bytes() == b"edited here\n"


def test_what_the_plan_cannot_read_is_unbound_not_planned(webdav_rig: Rig) -> None:
    remote = _remote(webdav_rig)
    for name, size in (("a.bin", 10), ("b.bin", 40), ("c.bin", 10), ("d.bin", 10)):
        (remote / name).write_bytes(b"x" * size)
    svc = SyncService(webdav_rig.store, webdav_rig.settings)
    svc.read_budget = ReadBudget(file_bytes=32, total_bytes=1 << 20, files=2)
    _, stored = _plan(webdav_rig, svc)
    p = stored.plan
    assert [o.path for o in p.ops] == ["a.bin", "c.bin"]
    unbound = {r.path: r.detail for r in p.reports if r.kind == "unbound"}
    assert set(unbound) == {"b.bin", "d.bin"}
    assert "at most 32 bytes a file, and it is 40 bytes" in unbound["b.bin"]
    assert "at most 2 files" in unbound["d.bin"] and "plan again" in unbound["d.bin"]
    assert (p.summary["download"], p.summary["unbound"], p.summary["download_bytes"]) == (2, 2, 20)
    rec = _propose(webdav_rig, svc, stored)
    assert webdav_rig.run(rec).status == "succeeded"
    assert sorted(_outcomes(webdav_rig, rec)) == ["a.bin", "c.bin"]
    assert not webdav_rig.local("b.bin").exists()


def test_a_plan_stored_without_content_is_not_proposed(webdav_rig: Rig) -> None:
    """A plan of a transfer known by size and mtime alone (stored before plans read
    content) is refused, not proposed as verified."""
    (_remote(webdav_rig) / "r.txt").write_bytes(b"remote\n")
    svc = SyncService(webdav_rig.store, webdav_rig.settings)
    folder = svc.folder(webdav_rig.ctx, "", None)
    caps = webdav_rig.drive.capabilities()
    listing = remote_entries_from_drive(webdav_rig.drive.list_tree(""), "")
    p: SyncPlan = plan([], listing, {}, PlanCapabilities(hash_types=caps.hash_types))
    assert [o.kind for o in p.ops] == ["download"] and not p.content
    pair = Pair(str(folder.root.path), "", webdav_rig.drive.spec, "")
    stored = svc.data.save_plan(
        pair=pair, root_name=folder.root.name, options={}, plan=p, baseline_generation=0,
        meta={}, skips=[],
    )  # fmt: skip
    with pytest.raises(LimitExceeded) as e:
        propose_sync(svc, webdav_rig.ctx, plan_id=stored.id, decisions={}, reason="old plan")
    assert e.value.error_code == "remote_unverifiable"
