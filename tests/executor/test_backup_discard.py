"""Attacks on deleting a stopped replacement's backup (`placet.executor.temps`
`replaced_as_approved`, `Drive.discard_backup`): a run stopped between the move of the
approved bytes onto the target and the delete of the owner's previous content, moved
aside under `.placet-tmp-keep-...`. The next run may delete that backup only when the
op is still approved, its target holds the approved bytes and the backup holds what
the evidence recorded under the target; owner content in any other state is kept.

The stopped run is set up through the store's own lease calls (claim, the in-progress
journal row with the op's temps, interrupted), as `placet.executor.run` journals them
before the first byte moves; the drive is real (a local folder; WebDAV: no digests)."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import pytest

from placet.drive.rclone_core import backup_name
from placet.executor.temps import Temp, journal_entry
from placet.proposals.evidence import local_file_evidence, remote_digest_type, remote_evidence
from placet.schema import Op, RemoteEvidence
from placet.store import LeaseHolder, ProposalRecord
from tests.support.rig import Rig

pytestmark = pytest.mark.usefixtures("store_backend")

OLD = b"the owner's previous content\n"
NEW = b"the approved new content, longer\n"


def _replacement(rig: Rig, index: int, rel: str, old: bytes, new: bytes) -> Op:
    """A sync op replacing drive file `rel` (holding `old` now) with local `new`, with
    the evidence the proposing core records."""
    assert rig.remote_dir is not None
    (rig.remote_dir / rel).write_bytes(old)
    rig.write(rel, new)
    local = local_file_evidence(
        rig.root, PurePosixPath(rel), remote_digest_type(rig.ctx), size_cap=None
    )
    remote = remote_evidence(rig.ctx, rel, read_content=True)
    return Op(index=index, kind="upload_revision", local_path=rel, remote_path=rel,
              size=len(new), expected_local=local, expected_remote=remote,
              replace=True)  # fmt: skip


def _upload(rig: Rig, index: int, rel: str, data: bytes) -> Op:
    rig.write(rel, data)
    local = local_file_evidence(
        rig.root, PurePosixPath(rel), remote_digest_type(rig.ctx), size_cap=None
    )
    return Op(index=index, kind="upload", local_path=rel, remote_path=rel, size=len(data),
              expected_local=local, expected_remote=RemoteEvidence(exists=False))  # fmt: skip


def _stop_after_the_move(rig: Rig, op: Op, new: bytes) -> Temp:
    """What a run stopped after moving `new` onto `op`'s target leaves on the drive: the
    previous content under a backup name, the approved bytes under the target. Returns
    the backup's journal entry."""
    assert rig.remote_dir is not None and op.remote_path is not None
    target = rig.remote_dir / op.remote_path
    backup = f"{op.remote_path.rpartition('/')[0]}/{backup_name(target.name)}".lstrip("/")
    os.replace(target, rig.remote_dir / backup)
    target.write_bytes(new)
    return journal_entry(op, "remote", backup)


def _interrupted(rig: Rig, rec: ProposalRecord, journal: dict[int, list[Temp]]) -> None:
    """Approve `rec` (every op), claim it, journal `journal`'s temps as ops in progress,
    then mark it interrupted, as recovery does after a kill."""
    rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": []})
    holder = LeaseHolder.current()
    rig.store.claim(rec.id, holder=holder)
    for index, temps in journal.items():
        rig.store.record_op_result(
            rec.id, op_index=index, op={}, outcome="failed",
            detail={"code": "in_progress", "temps": temps}, holder=holder,
        )  # fmt: skip
    rig.store.mark_interrupted(rec.id, actor="owner")


def _run_again(rig: Rig, rec: ProposalRecord, skip: list[int]) -> ProposalRecord:
    rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": skip})
    return rig.run(rec)


def _backups(rig: Rig) -> dict[str, bytes]:
    assert rig.remote_dir is not None
    return {
        str(p.relative_to(rig.remote_dir)): p.read_bytes()
        for p in rig.remote_dir.rglob(".placet-tmp-keep-*")
    }


def test_a_replacement_the_owner_unticked_on_reaccepting_keeps_its_backup(
    yes_rig: Rig,
) -> None:
    """Stopped after the move; the owner accepts again with that op unticked: nothing
    may be done for it, so the previous content stays beside the new file, listed."""
    op = _replacement(yes_rig, 0, "t.txt", OLD, NEW)
    rec = yes_rig.propose_ops([op, _upload(yes_rig, 1, "other.txt", b"other\n")])[0]
    backup = _stop_after_the_move(yes_rig, op, NEW)
    _interrupted(yes_rig, rec, {0: [backup]})
    final = _run_again(yes_rig, rec, skip=[0])
    assert {r.op_index: r.outcome for r in yes_rig.store.op_results(rec.id)} == {
        0: "skipped", 1: "done",
    }  # fmt: skip
    assert final.status == "succeeded"
    assert _backups(yes_rig) == {backup["path"]: OLD}
