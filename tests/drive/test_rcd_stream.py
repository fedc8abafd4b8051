"""Uploads above `RCD_UPLOAD_MAX` to sftp stream through rcd (`RcdUploads.upload_stream`):
real rclone, `rclone serve sftp` of a local folder (which the tests read directly).

A stopped stream must leave nothing under the real name and no temporary object: rcd
may store what it received under the temporary name (a body cut short within its
streaming cutoff is stored as a smaller file), so placet waits for rcd's answer before
it deletes the temporary object.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive
from placet.drive.proc import Children
from placet.drive.routes import RCD_UPLOAD_MAX
from placet.errors import DriveError, DriveUnavailable, StaleEvidence

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

MakeDrive = Callable[..., RcloneDrive]


def _fd(tmp_path: Path, data: bytes, name: str = "src.bin") -> tuple[int, str]:
    p = tmp_path / name
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), hashlib.sha256(data).hexdigest()


def _rcd_received(drive: RcloneDrive) -> list[str]:
    """Names of the uploads rcd itself received (an rcat's never reach it)."""
    body = drive.calls.rcd.call("core/transferred", {})
    return [
        str(t.get("name"))
        for t in body.get("transferred") or []
        if t.get("what") == "transferring" and "srcFs" not in t
    ]


def _files(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))}


def test_a_big_file_streams_through_rcd_and_lands_verified(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    drive = make_drive(sftp_server.spec(sub))
    data = os.urandom((5 << 20) + 17)
    fd, sha = _fd(tmp_path, data)
    journaled: list[str] = []
    seen: list[int] = []
    try:
        r = drive.upload_from_fd(
            fd,
            len(data),
            "big.bin",
            expected_sha256=sha,
            journal=journaled.append,
            progress=lambda done, total: seen.append(done),
        )
    finally:
        os.close(fd)
    assert (r.verification, r.path_taken) == ("digest:sha1", "temp+move")
    assert r.digest == hashlib.sha1(data).hexdigest()
    assert journaled == [r.temp_path]
    assert r.temp_path in _rcd_received(drive)  # rcd received it: no rcat process
    assert seen[-1] == len(data)
    assert _files(sftp_server.root / sub) == {"big.bin": data}  # no temporary object left


def test_a_big_replacement_streams_through_rcd(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    (sftp_server.root / sub).mkdir()
    (sftp_server.root / sub / "t.bin").write_bytes(b"previous")
    drive = make_drive(sftp_server.spec(sub))
    data = os.urandom(3 << 20)
    fd, sha = _fd(tmp_path, data)
    try:
        r = drive.upload_from_fd(fd, len(data), "t.bin", expected_sha256=sha, replace=True)
    finally:
        os.close(fd)
    assert r.temp_path in _rcd_received(drive)
    assert _files(sftp_server.root / sub) == {"t.bin": data}


def test_above_the_stream_max_an_upload_goes_through_rcat(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    drive = make_drive(sftp_server.spec(sub))
    drive.transfers.rcd_stream_max = 3 << 20
    results = {}
    for size in (3 << 20, (3 << 20) + 1):
        data = os.urandom(size)
        fd, sha = _fd(tmp_path, data, f"s{size}")
        try:
            results[size] = drive.upload_from_fd(fd, size, f"s{size}", expected_sha256=sha)
        finally:
            os.close(fd)
        assert (sftp_server.root / sub / f"s{size}").read_bytes() == data
    got = _rcd_received(drive)
    assert results[3 << 20].temp_path in got
    assert results[(3 << 20) + 1].temp_path not in got  # an rcat child carried it


@pytest.mark.parametrize("size", [RCD_UPLOAD_MAX + (512 << 10), 6 << 20])
def test_a_file_changed_after_approval_stops_the_stream_and_leaves_nothing(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str, size: int
) -> None:
    """Stopped within rcd's streaming cutoff (rclone stores the short body) and beyond
    it: nothing under the real name, no temporary object, rcd did get bytes. rcd stores
    at 2 MiB/s, so the short body lands well after the stream stopped: deleting the
    temporary object before rcd answered would miss it."""
    drive = make_drive(sftp_server.spec(sub), flags=("--bwlimit", "2M"))
    approved = os.urandom(size)
    now = bytearray(approved)
    now[-1] ^= 1  # same size, last byte differs: only the full digest can tell
    fd, _ = _fd(tmp_path, bytes(now))
    journaled: list[str] = []
    try:
        with pytest.raises(StaleEvidence):
            drive.upload_from_fd(
                fd,
                size,
                "a.bin",
                expected_sha256=hashlib.sha256(approved).hexdigest(),
                journal=journaled.append,
            )
    finally:
        os.close(fd)
    assert len(journaled) == 1 and journaled[0] in _rcd_received(drive)  # rcd got bytes
    assert _files(sftp_server.root / sub) == {}  # no target, no temp
    assert drive.stat("a.bin") is None


@pytest.mark.timeout(120)
def test_kill_all_stops_a_stream_leaving_no_target_and_no_temp(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    # rcd reads the stream at 1 MiB/s, so an 8 MiB upload is mid-stream at the kill
    drive = make_drive(sftp_server.spec(sub), flags=("--bwlimit", "1M"))
    data = os.urandom(8 << 20)
    fd, sha = _fd(tmp_path, data)
    group = Children()
    journaled: list[str] = []
    done: list[int] = []
    failure: list[BaseException] = []

    def upload() -> None:
        with group.adopt():
            try:
                drive.upload_from_fd(
                    fd,
                    len(data),
                    "big.bin",
                    expected_sha256=sha,
                    journal=journaled.append,
                    progress=lambda d, total: done.append(d),
                )
            except BaseException as e:
                failure.append(e)

    th = threading.Thread(target=upload)
    th.start()
    deadline = time.monotonic() + 60
    while (not done or done[-1] < (3 << 20)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done and done[-1] < len(data)
    assert group.kill_all() == 1  # the one request in flight
    th.join(90)
    os.close(fd)
    assert not th.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], DriveError), failure
    assert failure[0].error_code == "cancelled", failure[0]
    assert len(journaled) == 1
    assert _files(sftp_server.root / sub) == {}  # nothing under the real name, no temp


@pytest.mark.timeout(120)
def test_a_server_gone_mid_stream_is_retryable_and_leaves_nothing(
    start_server: Callable[[str], ServedRemote], make_drive: MakeDrive, tmp_path: Path
) -> None:
    served = start_server("sftp")
    drive = make_drive(served.spec())
    assert drive.list_folder("")[0] == []
    data = os.urandom(6 << 20)
    fd, sha = _fd(tmp_path, data)
    temps: list[str] = []

    def journal_then_vanish(temp: str) -> None:  # the server dies as the transfer starts
        temps.append(temp)
        served.stop()

    try:
        with pytest.raises(DriveUnavailable) as ei:
            drive.upload_from_fd(
                fd, len(data), "a.bin", expected_sha256=sha, journal=journal_then_vanish
            )
    finally:
        os.close(fd)
    assert ei.value.retryable and "http_status" in ei.value.details, ei.value  # rcd answered
    assert temps and _files(served.root) == {}
