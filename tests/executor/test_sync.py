"""Sync proposals run through the same per-op path: folders first, each op journaled by
its index, one failing op does not stop the others, and re-accepting reports the ops
that already happened as already_done."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import pytest

from placet.errors import PlacetError
from placet.executor import execute, load_plan
from placet.proposals.evidence import local_file_evidence
from placet.schema import LocalFileEvidence, Op, RemoteEvidence
from placet.store import ProposalRecord
from tests.support.rig import Rig, temp_names


def _ev(rig: Rig, rel: str) -> LocalFileEvidence:
    return local_file_evidence(rig.root, PurePosixPath(rel), "sha256", size_cap=None)


def _remote(rig: Rig, path: str) -> RemoteEvidence:
    e = rig.drive.stat(path)
    assert e is not None
    return RemoteEvidence(
        exists=True,
        size=e.size,
        mtime=e.mtime,
        digest_type="sha256",
        digest=rig.drive.digest_of(path, "sha256"),
    )


def _propose_sync(rig: Rig, ops: list[Op]) -> ProposalRecord:
    return rig.propose_ops(ops, "sync test")[0]


def test_sync_runs_folders_first_and_journals_every_op(rig: Rig) -> None:
    remote = rig.remote_dir
    assert remote is not None
    rig.write("a.txt", b"alpha")
    rig.write("sub/b.txt", b"bravo")
    rig.write("edited.txt", b"before")
    rig.write("rev.txt", b"new revision")
    (remote / "rev.txt").write_bytes(b"old revision")
    (remote / "far").mkdir()
    (remote / "far/c.txt").write_bytes(b"charlie")
    absent = RemoteEvidence(exists=False)
    ops = [
        Op(index=0, kind="upload", local_path="a.txt", remote_path="a.txt", size=5,
           expected_local=_ev(rig, "a.txt"), expected_remote=absent),
        Op(index=1, kind="upload", local_path="sub/b.txt", remote_path="sub/b.txt", size=5,
           expected_local=_ev(rig, "sub/b.txt"), expected_remote=absent),
        Op(index=2, kind="mkdir", remote_path="sub", expected_remote=absent),
        Op(index=3, kind="download", local_path="far/c.txt", remote_path="far/c.txt", size=7,
           expected_remote=_remote(rig, "far/c.txt")),
        Op(index=4, kind="upload", local_path="edited.txt", remote_path="edited.txt", size=6,
           expected_local=_ev(rig, "edited.txt"), expected_remote=absent),
        Op(index=5, kind="upload_revision", local_path="rev.txt", remote_path="rev.txt",
           size=12, expected_local=_ev(rig, "rev.txt"),
           expected_remote=_remote(rig, "rev.txt"), replace=True),
    ]  # fmt: skip
    rec = _propose_sync(rig, ops)
    assert [o.index for o in load_plan(rig.store, rec).ops] == [2, 0, 1, 3, 4, 5]
    rig.write("edited.txt", b"after!!")  # one op goes stale; the others still run

    final = rig.run(rec)
    assert final.status == "failed"
    outcomes = {r.op_index: r.outcome for r in rig.store.op_results(rec.id)}
    assert outcomes == {0: "done", 1: "done", 2: "done", 3: "done", 4: "stale", 5: "done"}
    assert (remote / "sub/b.txt").read_bytes() == b"bravo"
    assert (remote / "rev.txt").read_bytes() == b"new revision"
    assert rig.local("far/c.txt").read_bytes() == b"charlie"  # local folder made by walk
    assert not (remote / "edited.txt").exists()
    assert temp_names(remote) == [] and temp_names(rig.root.path) == []
    moved = [e.bytes_done for e in rig.events if e.op_result is not None]
    assert moved == sorted(moved) and moved[-1] == rig.events[-1].bytes_total == 35

    again = rig.run(rec)  # re-accepting: what happened is already_done
    outcomes = {r.op_index: r.outcome for r in rig.store.op_results(rec.id)}
    assert again.status == "failed" and again.attempt == 2
    assert outcomes == {0: "already_done", 1: "already_done", 2: "already_done",
                        3: "already_done", 4: "stale", 5: "already_done"}  # fmt: skip
    assert os.listdir(remote / "sub") == ["b.txt"]


def test_duplicate_op_indexes_are_refused(rig: Rig) -> None:
    absent = RemoteEvidence(exists=False)
    ops = [Op(index=0, kind="mkdir", remote_path="x", expected_remote=absent)] * 2
    rec = _propose_sync(rig, ops)
    rig.accept(rec)
    with pytest.raises(PlacetError) as e:
        execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert e.value.error_code == "request_invalid"
    assert rig.store.get(rec.id).status == "failed"
    assert rig.remote_dir is not None and os.listdir(rig.remote_dir) == []
