"""The owner's op selection on a sync (docs/design.md section 9, "Op results"): `skip_ops` is
validated and bound into the approval audit event by the store, the executor journals
those ops `skipped` without touching anything, the proposal succeeds only if every
selected op is done or already_done, and `placet accept --skip` does the same."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import pytest

from placet.errors import UsageError
from placet.proposals.evidence import local_file_evidence
from placet.schema import Op, RemoteEvidence
from placet.store import LeaseHolder, ProposalRecord
from tests.support.rig import Rig, placet_cli, temp_names

ABSENT = RemoteEvidence(exists=False)


def _upload(rig: Rig, index: int, rel: str, data: bytes) -> Op:
    rig.write(rel, data)
    ev = local_file_evidence(rig.root, PurePosixPath(rel), "sha256", size_cap=None)
    return Op(index=index, kind="upload", local_path=rel, remote_path=rel, size=len(data),
              expected_local=ev, expected_remote=ABSENT)  # fmt: skip


def _sync(rig: Rig, ops: list[Op]) -> ProposalRecord:
    return rig.propose_ops(ops, "sync test")[0]


def _three(rig: Rig) -> ProposalRecord:
    return _sync(
        rig,
        [
            Op(index=0, kind="mkdir", remote_path="sub", expected_remote=ABSENT),
            _upload(rig, 1, "sub/a.txt", b"alpha"),
            _upload(rig, 2, "b.txt", b"bravo"),
        ],
    )


def _approval(rig: Rig, pid: int) -> dict[str, object]:
    events = [e for e in rig.store.audit_events(proposal_id=pid) if e.to_status == "approved"]
    return events[-1].detail


def test_accept_validates_and_records_the_selection(yes_rig: Rig) -> None:
    rec = _three(yes_rig)
    bad: list[tuple[object, str]] = [
        ([7], "skip_invalid"), ("1", "skip_invalid"), ([True], "skip_invalid"),
        ([0, 1, 2], "nothing_selected"),
    ]  # fmt: skip
    for skip, code in bad:
        with pytest.raises(UsageError) as e:
            yes_rig.store.accept(rec.id, detail={"skip_ops": skip})
        assert e.value.error_code == code, skip
    assert yes_rig.store.get(rec.id).status == "pending"

    upload = yes_rig.upload("b.txt")  # not a sync: no ops to untick
    with pytest.raises(UsageError) as e:
        yes_rig.store.accept(upload.id, detail={"skip_ops": [0]})
    assert e.value.error_code == "skip_invalid"
    yes_rig.store.accept(upload.id, detail={"skip_ops": []})
    assert "skip_ops" not in _approval(yes_rig, upload.id)

    yes_rig.store.accept(rec.id, detail={"skip_ops": [2, 2]})
    assert _approval(yes_rig, rec.id)["skip_ops"] == [2]
    other = _sync(yes_rig, [Op(index=0, kind="mkdir", remote_path="x", expected_remote=ABSENT)])
    yes_rig.store.accept(other.id)  # a sync always records its selection, [] = every op
    assert _approval(yes_rig, other.id)["skip_ops"] == []


def test_executor_journals_unticked_ops_skipped_and_touches_nothing(yes_rig: Rig) -> None:
    remote = yes_rig.remote_dir
    assert remote is not None
    rec = _three(yes_rig)
    yes_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": [2]})
    final = yes_rig.run(rec)
    assert final.status == "succeeded"
    outcomes = {r.op_index: r.outcome for r in yes_rig.store.op_results(rec.id)}
    assert outcomes == {0: "done", 1: "done", 2: "skipped"}
    assert (remote / "sub/a.txt").read_bytes() == b"alpha"
    assert not (remote / "b.txt").exists() and temp_names(remote) == []
    assert final.summary is not None and final.summary["skipped_by_owner"] == [2]
    # Progress counts only the selected bytes.
    assert yes_rig.events[-1].bytes_total == 5 and yes_rig.events[-1].bytes_done == 5


def test_a_skipped_outcome_for_a_selected_op_fails_the_proposal(yes_rig: Rig) -> None:
    """The store checks skipped results against the approval, not the executor's word."""
    rec = _three(yes_rig)
    yes_rig.store.accept(rec.id, detail={"skip_ops": [2]})
    holder = LeaseHolder.current()
    yes_rig.store.claim(rec.id, holder=holder)
    for i in (0, 1, 2):
        outcome = "done" if i == 0 else "skipped"  # op 1 was selected, yet "skipped"
        yes_rig.store.record_op_result(
            rec.id, op_index=i, op={}, outcome=outcome, detail={}, holder=holder
        )
    assert yes_rig.store.finish(rec.id, holder=holder, expected_ops=3).status == "failed"


def test_reaccepting_with_another_selection_runs_what_was_skipped(yes_rig: Rig) -> None:
    remote = yes_rig.remote_dir
    assert remote is not None
    rec = _three(yes_rig)
    yes_rig.store.accept(rec.id, detail={"skip_ops": [0, 1]})
    holder = LeaseHolder.current()
    yes_rig.store.claim(rec.id, holder=holder)
    yes_rig.store.mark_interrupted(rec.id, actor="owner")  # stopped before any op
    yes_rig.store.accept(rec.id, detail={"skip_ops": [2]})
    final = yes_rig.run(rec)
    assert final.status == "succeeded" and final.attempt == 2
    assert {r.op_index: r.outcome for r in yes_rig.store.op_results(rec.id)} == {
        0: "done", 1: "done", 2: "skipped",
    }  # fmt: skip
    assert os.listdir(remote) == ["sub"]


def test_cli_skip_binds_the_selection(yes_rig: Rig) -> None:
    remote = yes_rig.remote_dir
    assert remote is not None
    rec = _three(yes_rig)
    env = dict(os.environ)
    r = placet_cli("accept", str(rec.id), "--yes", "--skip", "9", env=env)
    assert r.returncode == 2 and "no such op" in r.stderr
    assert yes_rig.store.get(rec.id).status == "pending"

    r = placet_cli("accept", str(rec.id), "--yes", "--skip", "2", env=env)
    assert r.returncode == 0, r.stderr
    assert "#2 upload  " in r.stdout and "b.txt  [SKIPPED: --skip" in r.stdout
    assert "ops           3 (1 skipped with --skip)" in r.stdout
    assert "2 done, 1 skipped" in r.stdout  # a skipped op ends as chosen: no line of its own
    assert _approval(yes_rig, rec.id)["skip_ops"] == [2]
    assert not (remote / "b.txt").exists() and (remote / "sub/a.txt").exists()

    upload = yes_rig.upload("b.txt")
    r = placet_cli("accept", str(upload.id), "--yes", "--skip", "0", env=env)
    assert r.returncode == 2 and "single op" in r.stderr
