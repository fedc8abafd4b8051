"""The object that takes the target's name is proven to be the approved bytes.

A local process that can write the drive folder swaps placet's temporary object for
other bytes of the same size after placet verified it and before the move. The swap
happens at the last moment placet cannot see: just before rclone is asked to move the
temporary object (`SwappingDrive._swapping_rc`, the real drive otherwise). Every upload path is
covered: one file through rcd, one through `rclone rcat`, a replacement, a batch of new
files, and the executor: the op fails `verify_failed`, the target holds its previous
content (or nothing, for a new file), and no temporary object or backup remains.
"""

from __future__ import annotations

import hashlib
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.drive.batches import NewFile
from placet.errors import DriveError
from placet.executor.temps import journal_entry, journaled_temps, remove_temp
from placet.names import TEMP_PREFIX, is_placet_temp
from placet.schema import LocalFileEvidence, Op, RemoteEvidence
from placet.store import OpResultRecord
from tests.support.rig import make_rig

RCLONE = Path(sys.executable).parent / "rclone"


class SwappingDrive(RcloneDrive):
    """A real `RcloneDrive` over a local folder whose temporary objects an attacker
    replaces (same size, other bytes) right before each move of one onto its target:
    every rcd call of its parts passes `_swapping_rc` first."""

    swaps: list[str]

    def __init__(self, spec: str, **kw: Any) -> None:
        super().__init__(spec, **kw)
        self.swaps = []
        self._real_rc = self.calls.rc
        self.calls.rc = self._swapping_rc

    def _swapping_rc(self, method: str, params: dict[str, Any], **kw: Any) -> Any:
        calls = params.get("inputs", [params]) if method == "job/batch" else [params]
        for call in calls:
            src = call.get("srcRemote")
            if isinstance(src, str) and is_placet_temp(src.rsplit("/", 1)[-1]):
                self._swap(src)
        return self._real_rc(method, params, **kw)

    def _swap(self, temp: str) -> None:
        p = Path(self.spec) / temp
        other = p.with_name("evil")
        other.write_bytes(b"X" * p.stat().st_size)
        os.replace(other, p)  # the attacker's object now has the temporary name
        self.swaps.append(temp)


@pytest.fixture
def drive(tmp_path: Path, rclone_home: Path) -> Any:
    root = tmp_path / "drive"
    root.mkdir()
    d = SwappingDrive(
        str(root), rclone_path=RCLONE, env={"RCLONE_CONFIG": "/dev/null"}, run_dir=tmp_path / "r"
    )
    yield d
    d.close()


def _fd(tmp_path: Path, data: bytes) -> tuple[int, str]:
    p = tmp_path / "src.bin"
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), hashlib.sha256(data).hexdigest()


def _left(root: Path) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(TEMP_PREFIX))


@pytest.mark.parametrize("via", ["rcd", "rcat"])
def test_a_swapped_temp_never_becomes_a_new_file(
    drive: SwappingDrive, tmp_path: Path, via: str
) -> None:
    if via == "rcat":
        drive.transfers.rcd_upload_max = -1
        drive.transfers.rcd_stream_backends = frozenset()
    fd, sha = _fd(tmp_path, b"approved bytes\n")
    with pytest.raises(DriveError) as e:
        drive.upload_from_fd(fd, 15, "new.txt", expected_sha256=sha)
    assert e.value.error_code == "verify_failed" and e.value.details["restored"] is False
    assert len(drive.swaps) == 1
    root = Path(drive.spec)
    assert not (root / "new.txt").exists() and _left(root) == []


@pytest.mark.parametrize("via", ["rcd", "rcat"])
def test_a_swapped_temp_never_replaces_the_previous_content(
    drive: SwappingDrive, tmp_path: Path, via: str
) -> None:
    if via == "rcat":
        drive.transfers.rcd_upload_max = -1
        drive.transfers.rcd_stream_backends = frozenset()
    root = Path(drive.spec)
    (root / "t.txt").write_bytes(b"the owner's previous content\n")
    journaled: list[str] = []
    fd, sha = _fd(tmp_path, b"approved bytes\n")
    with pytest.raises(DriveError) as e:
        drive.upload_from_fd(
            fd, 15, "t.txt", expected_sha256=sha, replace=True, journal=journaled.append
        )
    assert e.value.error_code == "verify_failed" and e.value.details["restored"] is True
    assert (root / "t.txt").read_bytes() == b"the owner's previous content\n"
    assert _left(root) == []
    assert len(journaled) == 2  # the temporary object, then the backup of the target


def test_a_replacement_that_holds_keeps_no_backup(drive: SwappingDrive, tmp_path: Path) -> None:
    drive.swaps = []
    root = Path(drive.spec)
    (root / "t.txt").write_bytes(b"old\n")
    fd, sha = _fd(tmp_path, b"approved bytes\n")
    honest = RcloneDrive(
        drive.spec, rclone_path=RCLONE, env={"RCLONE_CONFIG": "/dev/null"}, run_dir=tmp_path / "h"
    )
    try:
        r = honest.upload_from_fd(fd, 15, "t.txt", expected_sha256=sha, replace=True)
    finally:
        honest.close()
    assert r.verification == "digest:sha256"
    assert (root / "t.txt").read_bytes() == b"approved bytes\n" and _left(root) == []


def test_a_swapped_temp_in_a_batch_is_removed(drive: SwappingDrive, tmp_path: Path) -> None:
    files = []
    for i in range(3):
        data = f"file {i}\n".encode()
        p = tmp_path / f"s{i}"
        p.write_bytes(data)
        files.append(
            NewFile(
                os.open(p, os.O_RDONLY), len(data), f"b/f{i}.txt", hashlib.sha256(data).hexdigest()
            )
        )
    drive.mkdir("b")
    out = drive.batches.upload_new_batch(files)
    assert len(drive.swaps) == 3
    assert all(isinstance(o, DriveError) and o.error_code == "verify_failed" for o in out)
    assert os.listdir(Path(drive.spec) / "b") == []


def test_the_executor_reports_the_swap_and_keeps_the_target(
    drive: SwappingDrive, settings: Settings, tmp_path: Path
) -> None:
    root = Path(drive.spec)
    (root / "t.txt").write_bytes(b"the owner's previous content\n")
    rig = make_rig(settings, drive, tmp_path, root)
    rig.write("t.txt", b"approved bytes\n")
    new = rig.upload("t.txt", "", name="n.txt")
    rep = rig.upload("t.txt", "", replace_existing=True)
    for rec in (new, rep):
        done = rig.run(rec)
        assert done.status == "failed"
        assert rig.result(rec).detail["code"] == "verify_failed"
    assert (root / "t.txt").read_bytes() == b"the owner's previous content\n"
    assert not (root / "n.txt").exists() and _left(root) == []


def test_a_backup_left_by_a_stopped_run_is_put_back(drive: SwappingDrive, tmp_path: Path) -> None:
    root = Path(drive.spec)
    (root / ".placet-tmp-keep-0123456789ab-t.txt").write_bytes(b"previous\n")
    (root / ".placet-tmp-keep-0123456789ab-u.txt").write_bytes(b"previous u\n")
    (root / "u.txt").write_bytes(b"newer\n")
    entry = {"side": "backup", "path": ".placet-tmp-keep-0123456789ab-t.txt", "restore_to": "t.txt"}
    assert remove_temp(drive, None, entry) is True
    assert (root / "t.txt").read_bytes() == b"previous\n"
    # something is under the name: the backup stays, listed for the owner, never deleted
    entry = {"side": "backup", "path": ".placet-tmp-keep-0123456789ab-u.txt", "restore_to": "u.txt"}
    assert remove_temp(drive, None, entry) is True
    assert (root / "u.txt").read_bytes() == b"newer\n"
    assert _left(root) == [".placet-tmp-keep-0123456789ab-u.txt"]
    assert drive.cleanup_temps("", older_than=timedelta(0)) == []
    assert _left(root) == [".placet-tmp-keep-0123456789ab-u.txt"]


def test_a_backup_is_journaled_to_be_put_back_not_deleted() -> None:
    op = Op(index=3, kind="upload", remote_path="docs/t.txt")
    backup = "docs/.placet-tmp-keep-0123456789ab-t.txt"
    temp = "docs/.placet-tmp-0123456789ab-t.txt"
    entries = [journal_entry(op, "remote", temp), journal_entry(op, "remote", backup)]
    assert entries[1] == {"side": "backup", "path": backup, "restore_to": "docs/t.txt"}
    row = OpResultRecord(
        proposal_id=1,
        attempt=0,
        op_index=3,
        op=op.model_dump(mode="json"),
        outcome="failed",
        detail={"code": "in_progress", "temps": entries},
        recorded_at=datetime.now(UTC),
    )
    assert journaled_temps([row]) == {3: entries}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _replacement(old: bytes, new: bytes) -> Op:
    """An approved replacement of t.txt: `old` recorded under the name, `new` approved."""
    return Op(
        index=0,
        kind="upload_revision",
        local_path="t.txt",
        remote_path="t.txt",
        size=len(new),
        expected_local=LocalFileEvidence(
            size=len(new), mtime_ns=0, sha256=_sha(new), digest_type="sha256", digest=_sha(new)
        ),
        expected_remote=RemoteEvidence(
            exists=True, size=len(old), digest_type="sha256", digest=_sha(old)
        ),
        replace=True,
    )


@pytest.mark.parametrize(
    ("target", "aside", "left"),
    [
        # stopped after the move, before the delete: the op is complete, the backup goes
        (b"approved new\n", b"previous\n", []),
        # the backup is not what the owner saw under the name: kept for the owner
        (b"approved new\n", b"written since\n", ["keep"]),
        # the target is not the approved bytes: the backup is kept (never moved onto it)
        (b"someone else\n", b"previous\n", ["keep"]),
    ],
)
def test_a_backup_is_deleted_only_when_the_replacement_is_proven_complete(
    drive: SwappingDrive, target: bytes, aside: bytes, left: list[str]
) -> None:
    """A run killed between the move onto the target and the backup's delete left the
    owner's previous content aside: the next run deletes it when the target holds the
    approved bytes and the backup holds what the evidence recorded, and only then."""
    root = Path(drive.spec)
    backup = ".placet-tmp-keep-0123456789ab-t.txt"
    (root / "t.txt").write_bytes(target)
    (root / backup).write_bytes(aside)
    op = _replacement(b"previous\n", b"approved new\n")
    entry = journal_entry(op, "remote", backup)
    assert remove_temp(drive, None, entry, op) is True
    assert (root / "t.txt").read_bytes() == target
    assert _left(root) == [backup for _ in left]
    if left:
        assert (root / backup).read_bytes() == aside


def test_a_backup_of_an_unfinished_replacement_is_put_back(drive: SwappingDrive) -> None:
    root = Path(drive.spec)
    backup = ".placet-tmp-keep-0123456789ab-t.txt"
    (root / backup).write_bytes(b"previous\n")
    op = _replacement(b"previous\n", b"approved new\n")
    assert remove_temp(drive, None, journal_entry(op, "remote", backup), op) is True
    assert (root / "t.txt").read_bytes() == b"previous\n" and _left(root) == []
