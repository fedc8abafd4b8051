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
import signal
import time
import unicodedata
from pathlib import Path, PurePosixPath

import pytest

from placet.drive.temps import backup_name
from placet.executor.temps import Temp, journal_entry
from placet.proposals.evidence import local_file_evidence, remote_digest_type, remote_evidence
from placet.schema import Op
from placet.store import LeaseHolder, ProposalRecord
from tests.support.rig import Rig, placet_cli, rewrite_same_size, sha256, start_accept_yes

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
    rec = yes_rig.propose_ops([op, yes_rig.upload_op(1, "other.txt", b"other\n")])[0]
    backup = _stop_after_the_move(yes_rig, op, NEW)
    _interrupted(yes_rig, rec, {0: [backup]})
    final = _run_again(yes_rig, rec, skip=[0])
    assert {r.op_index: r.outcome for r in yes_rig.store.op_results(rec.id)} == {
        0: "skipped", 1: "done",
    }  # fmt: skip
    assert final.status == "succeeded"
    assert _backups(yes_rig) == {backup["path"]: OLD}
    assert final.summary is not None  # the run says it left the backup, not that it removed it
    assert final.summary["backups_left"] == [backup["path"]]
    assert f"backup:{backup['path']}" not in final.summary.get("temps_removed", [])


LONG = "é" * 123 + ".txt"  # 250 bytes of UTF-8: its backup name is cut to 255 bytes
NFC = unicodedata.normalize("NFC", "café.txt")
NFD = unicodedata.normalize("NFD", "café.txt")


@pytest.mark.parametrize("remote", ["local", "webdav"])
def test_a_sync_stopped_among_many_replacements_deletes_only_proven_backups(
    request: pytest.FixtureRequest, remote: str
) -> None:
    """A sync of replacements stopped mid-way, each in another state, on a drive with
    digests and on one without (WebDAV: read-back SHA-256). Accepting again deletes a
    backup only where the replacement is proven complete and the backup is what the
    owner approved replacing; every other piece of owner content stays where it is.
    (The NFC/NFD twin runs on the local folder only: `rclone serve webdav` answers for
    one name with the other, or not, as its directory cache has it.)"""
    rig: Rig = request.getfixturevalue("rig" if remote == "local" else "webdav_rig")
    d = rig.remote_dir
    assert d is not None
    names = ["t0.txt", "t1.txt", "t2.txt", "t3.txt", "t4.txt", "t5.txt", LONG]
    if remote == "local":
        names.append(NFC)
    old = {n: OLD + n.encode() for n in names}
    new = {n: NEW + n.encode() for n in names}
    ops = [_replacement(rig, i, n, old[n], new[n]) for i, n in enumerate(names)]
    rec = rig.propose_ops(ops)[0]
    journal: dict[int, list[Temp]] = {}
    for i, n in enumerate(names):  # stopped after the move
        journal[i] = [_stop_after_the_move(rig, ops[i], new[n])]
    for n in ("t1.txt", NFC):  # stopped after the move aside, before the move in
        (d / n).unlink(missing_ok=True)
    kept = {}
    # t2: the owner wrote other bytes over the target since
    (d / "t2.txt").write_bytes(b"the owner wrote this since\n")
    kept[journal[2][0]["path"]] = old["t2.txt"]
    # t3: the backup was rewritten since, same size, its mtime put back
    rewrite_same_size(d / journal[3][0]["path"], b"Z" * len(old["t3.txt"]))
    kept[journal[3][0]["path"]] = b"Z" * len(old["t3.txt"])
    # t4: the owner's own file named like a backup, with the replaced bytes, not journaled
    lookalike = backup_name("t4.txt")
    (d / lookalike).write_bytes(old["t4.txt"])
    kept[lookalike] = old["t4.txt"]
    # t5: a journal entry (hand-made) whose backup names another op's target
    journal[5] = [{**journal[5][0], "restore_to": "t0.txt"}]
    kept[journal[5][0]["path"]] = old["t5.txt"]
    # NFC: the owner's NFD twin of the emptied target holds the approved bytes: the
    # backup goes back under the NFC name and the op refuses the twin (stale)
    expected = dict.fromkeys(range(len(names)), "already_done")
    expected.update({1: "done", 2: "stale"})
    if NFC in names:
        (d / NFD).write_bytes(new[NFC])
        expected[7] = "stale"
    _interrupted(rig, rec, journal)
    final = _run_again(rig, rec, skip=[])
    results = rig.store.op_results(rec.id)
    assert {r.op_index: r.outcome for r in results} == expected, [
        (r.op_index, r.detail) for r in results if r.outcome != expected[r.op_index]
    ]
    assert final.status == "failed"  # t2 is stale
    assert _backups(rig) == kept
    assert (d / "t2.txt").read_bytes() == b"the owner wrote this since\n"
    if NFC in names:
        assert (d / NFD).read_bytes() == new[NFC]
        assert (d / NFC).read_bytes() == old[NFC]
    for n in names:
        if n not in ("t2.txt", NFC):
            assert (d / n).read_bytes() == new[n], n


@pytest.mark.timeout(240)
def test_a_sync_of_many_replacements_killed_mid_way_ends_approved_with_no_backup_left(
    yes_rig: Rig,
) -> None:
    """`placet accept --yes` of eight replacements (4 MiB each, four at a time) killed
    -9 as soon as a second backup is on the drive, whatever the other transfers were
    doing; recovery, then accepting again: every target holds its approved bytes, every
    op is done or already done, and no temporary name or backup is left."""
    d = yes_rig.remote_dir
    assert d is not None
    names = [f"r{i}.bin" for i in range(8)]
    new = {n: os.urandom(4 << 20) for n in names}
    ops = [_replacement(yes_rig, i, n, os.urandom(4 << 20), new[n]) for i, n in enumerate(names)]
    rec = yes_rig.propose_ops(ops)[0]
    yes_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "skip_ops": []})
    proc = start_accept_yes(rec.id)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if len(_backups_named(d)) >= 2:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.0005)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    if killed:
        assert yes_rig.store.sweep().interrupted == [rec.id]
        r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
        assert r.returncode == 0, r.stderr
    assert yes_rig.store.get(rec.id).status == "succeeded"
    outcomes = {r.op_index: r.outcome for r in yes_rig.store.op_results(rec.id)}
    assert set(outcomes.values()) <= {"done", "already_done"}, outcomes
    assert sorted(os.listdir(d)) == names
    for n in names:
        assert sha256((d / n).read_bytes()) == sha256(new[n]), n


def _backups_named(d: Path) -> list[str]:
    return [n for n in os.listdir(d) if n.startswith(".placet-tmp-keep-")]
