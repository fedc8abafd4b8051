"""Small new files run in batches (placet.executor.batch), results are
journaled in batches (placet.executor.run), and every safety property holds per op:

- `placet accept` killed (-9) after a batch's files were moved into place but before
  their results were committed: recovery marks the proposal interrupted, accepting again
  completes, and the ops whose journal rows were lost report `already_done`;
- stale evidence is still caught per op inside a batch (a local file edited, edited with
  its size and mtime kept, vanished; a target that appeared), a target already holding
  the approved bytes is `already_done`, and the other ops of the batch are done.

Everything is real: the sync service plans, `placet accept` / `execute` run with the
rclone binary against a local-folder remote, the journal is the SQLite store.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from placet.executor.ops import load_plan
from placet.schema import Op
from placet.store import ProposalRecord
from placet.store.proposals import OPS_PAGE
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import (
    Rig,
    placet_cli,
    start_accept_yes,
    temp_names,
    write_config,
)
from tests.support.trees import deep_tree

FOLDERS, PER_FOLDER = 11, 100  # 1,111 ops: more than one page of the store's op reads


@pytest.fixture
def serial_rig(local_rig: Callable[..., Rig]) -> Rig:
    """A rig whose transfers run one at a time, in process and in `placet accept --yes`."""
    r = local_rig(transfers=1)
    write_config(r.settings, drive=r.drive.spec, allow_yes=True, transfers=1)
    return r


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _propose(rig: Rig) -> ProposalRecord:
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False,
                         allow_empty_side=False)  # fmt: skip
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="batch")
    assert created
    return rec


def _ops(rig: Rig, rec_id: int) -> list[Op]:
    """The proposal's ops as the executor reads them."""
    return load_plan(rig.store, rig.store.get(rec_id)).ops


def _in_place(remote: Path) -> set[str]:
    """Real (non-temporary) file paths under `remote`, relative, at any depth."""
    out = set()
    for dirpath, _, filenames in os.walk(remote):
        rel = os.path.relpath(dirpath, remote)
        out |= {f"{rel}/{n}" for n in filenames if not n.startswith(".placet-tmp-")}
    return out


def _kill_after_a_batch_moved(rig: Rig, rec_id: int) -> set[int]:
    """Run `placet accept ID --yes`; freeze it (SIGSTOP) until files are in place whose
    journal rows are not `done`, then kill -9 it. Returns those ops' indexes."""
    assert rig.remote_dir is not None
    proc = start_accept_yes(rec_id)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"placet accept ended before files were in place unjournaled: "
                            f"{proc.stderr.read()!r}")  # type: ignore[union-attr]  # fmt: skip
            if _in_place(rig.remote_dir):
                os.kill(proc.pid, signal.SIGSTOP)  # frozen: its journal cannot move on
                placed = _in_place(rig.remote_dir)
                rows = {r.op_index: r for r in rig.store.op_results(rec_id)}
                lost = {
                    op.index for op in _ops(rig, rec_id)
                    if op.remote_path in placed and op.kind == "upload"
                    and (op.index not in rows or rows[op.index].outcome != "done")
                }  # fmt: skip
                if lost:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return lost
                os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.002)
        pytest.fail("never saw a batch in place before its results were journaled")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise AssertionError("unreachable")


def _flat(rig: Rig) -> list[str]:
    names = [f"d{d}/f{f:03d}.txt" for d in range(FOLDERS) for f in range(PER_FOLDER)]
    for i, rel in enumerate(names):
        rig.write(rel, os.urandom(64 + i % 1900))
    return names


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shape", ["flat", "deep"])
def test_kill_mid_batch_then_accept_again_reports_lost_ops_already_done(
    serial_rig: Rig, shape: str
) -> None:
    """Folders of 100 files, or 1,200 files 1-10 per folder six levels deep (batches
    across folders): killed mid-apply, accepted again, nothing lost or run twice."""
    assert serial_rig.remote_dir is not None
    names = _flat(serial_rig) if shape == "flat" else deep_tree(serial_rig.write, 1200)
    rec = _propose(serial_rig)
    serial_rig.accept(rec)

    lost = _kill_after_a_batch_moved(serial_rig, rec.id)
    # Recovery: the holder is dead on this host, so the proposal is interrupted at once.
    assert serial_rig.store.sweep().interrupted == [rec.id]
    assert serial_rig.store.get(rec.id).status == "interrupted"
    first = {r.op_index: r for r in serial_rig.store.op_results(rec.id)}
    assert all(first.get(i) is None or first[i].outcome == "failed" for i in lost)

    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ), timeout=240)
    assert r.returncode == 0, r.stderr
    final = serial_rig.store.get(rec.id)
    assert final.status == "succeeded" and final.attempt == 2
    second = {r.op_index: r for r in serial_rig.store.op_results(rec.id)}
    assert {second[i].outcome for i in lost} == {"already_done"}
    assert {r.outcome for r in second.values()} <= {"done", "already_done"}
    # The ops read a page at a time (placet accept, then the executor on the same plan)
    # all ran, each once: the journal holds each op, as stored, exactly once.
    ops = _ops(serial_rig, rec.id)
    assert len(ops) > OPS_PAGE
    assert len(second) == len(ops) == len({op.index for op in ops})
    assert all(second[op.index].op == op.model_dump(mode="json") for op in ops)
    for rel in names:
        assert _sha(serial_rig.remote_dir / rel) == _sha(serial_rig.local(rel)), rel
    assert temp_names(serial_rig.remote_dir) == []


def _box_proposed(rig: Rig) -> tuple[list[str], ProposalRecord]:
    """30 small files in folder ``box`` proposed; ``box`` made on the drive, empty."""
    assert rig.remote_dir is not None
    names = [f"box/f{i:02d}.txt" for i in range(30)]
    for i, rel in enumerate(names):
        rig.write(rel, f"file {i}\n".encode() * (i + 1))
    rec = _propose(rig)
    (rig.remote_dir / "box").mkdir()
    return names, rec


def test_stale_evidence_is_caught_per_op_inside_a_batch(
    serial_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert serial_rig.remote_dir is not None
    names, rec = _box_proposed(serial_rig)
    serial_rig.write("box/f03.txt", b"edited after the plan, another size\n")
    same_size = serial_rig.local("box/f04.txt")
    st = same_size.stat()
    same_size.write_bytes(b"X" * st.st_size)  # same size, mtime put back: bytes differ
    os.utime(same_size, ns=(st.st_atime_ns, st.st_mtime_ns))
    serial_rig.local("box/f05.txt").unlink()
    (serial_rig.remote_dir / "box/f06.txt").write_bytes(b"appeared on the drive")
    (serial_rig.remote_dir / "box/f07.txt").write_bytes(
        serial_rig.local("box/f07.txt").read_bytes()
    )

    batches: list[list[str]] = []
    real = serial_rig.drive.batches.upload_new_batch

    def spy(files: Any, **kw: Any) -> Any:  # counts the calls, changes nothing
        batches.append([f.remote_path for f in files])
        return real(files, **kw)

    monkeypatch.setattr(serial_rig.drive.batches, "upload_new_batch", spy)
    final = serial_rig.run(rec)
    assert final.status == "failed"
    # One batch took every op whose local file was as the proposal saw it (f03 changed
    # size, f05 vanished: stale before anything was read or sent) and whose target was absent.
    assert len(batches) == 1
    # f06 and f07, whose targets the folder's listing found there, left it first.
    assert sorted(batches[0]) == [p for p in names if p[-6:-4] not in ("03", "05", "06", "07")]
    results = {r.op.get("remote_path"): r for r in serial_rig.store.op_results(rec.id)}
    assert results["box/f03.txt"].outcome == "stale"
    assert results["box/f03.txt"].detail["details"]["side"] == "local"
    assert results["box/f04.txt"].outcome == "stale"
    assert results["box/f04.txt"].detail["details"]["digest_type"] == "sha256"
    assert results["box/f05.txt"].outcome == "stale"
    assert results["box/f05.txt"].detail["details"]["found"] == {"exists": False}
    assert results["box/f06.txt"].outcome == "stale"
    assert results["box/f06.txt"].detail["details"]["side"] == "remote"
    assert results["box/f07.txt"].outcome == "already_done"
    done = [p for p, r in results.items() if r.outcome == "done"]
    assert len(done) == 25 and all(results[p].op["kind"] == "upload" for p in done)
    # The stale ops put nothing under their names; the others hold the approved bytes.
    assert not (serial_rig.remote_dir / "box/f03.txt").exists()
    assert not (serial_rig.remote_dir / "box/f04.txt").exists()
    assert not (serial_rig.remote_dir / "box/f05.txt").exists()
    assert (serial_rig.remote_dir / "box/f06.txt").read_bytes() == b"appeared on the drive"
    for p in done:
        assert _sha(serial_rig.remote_dir / p) == _sha(serial_rig.local(p)), p
        assert results[p].detail["verification"] == "digest:sha256"
    assert temp_names(serial_rig.remote_dir) == []


def test_targets_in_place_are_already_done_from_one_listing_not_a_lookup_each(
    serial_rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose targets already hold the approved bytes (a re-accept after a crash)
    finds them already_done from the folder's listing: no stat or digest per op, nothing
    sent; a target there with other bytes still runs alone and is stale, as it would be."""
    assert serial_rig.remote_dir is not None
    names, rec = _box_proposed(serial_rig)
    for rel in names:
        (serial_rig.remote_dir / rel).write_bytes(serial_rig.local(rel).read_bytes())
    (serial_rig.remote_dir / "box/f09.txt").write_bytes(b"other bytes on the drive")

    lookups: list[str] = []
    sent: list[int] = []
    drive = serial_rig.drive
    real_stat, real_batch = drive.stat, drive.batches.upload_new_batch

    def stat(path: str) -> Any:  # counts the calls, changes nothing
        lookups.append(path)
        return real_stat(path)

    def batch(files: Any, **kw: Any) -> Any:
        sent.append(len(files))
        return real_batch(files, **kw)

    monkeypatch.setattr(drive, "stat", stat)
    monkeypatch.setattr(drive.batches, "upload_new_batch", batch)
    final = serial_rig.run(rec)
    assert final.status == "failed"
    results = {r.op.get("remote_path"): r for r in serial_rig.store.op_results(rec.id)}
    assert results["box/f09.txt"].outcome == "stale"
    assert results["box/f09.txt"].detail["details"]["side"] == "remote"
    for rel in names:
        if rel != "box/f09.txt":
            assert results[rel].outcome == "already_done", rel
            assert results[rel].detail["verification"] == "digest:sha256"
            assert results[rel].detail["digest"] == _sha(serial_rig.local(rel))
    assert [p for p in lookups if p.startswith("box/f")] == ["box/f09.txt"]
    assert sent == []
    assert (serial_rig.remote_dir / "box/f09.txt").read_bytes() == b"other bytes on the drive"
