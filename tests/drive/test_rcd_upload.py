"""Small new files through rcd's `operations/uploadfile` (`Transfers.rcd_upload_max`):
real rclone, a local-folder remote and `rclone serve webdav`.

What rcd stored is read from its own accounting (`core/transferred`), so each test knows
which path an upload took: rcd lists the uploads it received, rcat's never reach it.
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

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

from placet.drive import RcloneDrive
from placet.drive.proc import Children
from placet.drive.routes import RCD_STREAM_LOCAL_MAX, RCD_UPLOAD_MAX
from placet.errors import DriveError, StaleEvidence
from placet.names import TEMP_PREFIX

HOSTILE_NAMES = [
    "ünïcödé naïve café.txt",
    "with spaces and #hash %41 %%.txt",
    "quotes 'single' \"double\".txt",
    "back\\slash;semi=equals,comma.txt",
    "日本語 ファイル名",
    "dash- & (paren) [bracket] {brace} ~tilde +plus",
    "x" * 200,
]


def _content(i: int) -> bytes:
    """Bytes a multipart parser could trip on: boundary-like lines, CRLFs, NULs."""
    return (
        b"--boundary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="../evil"\r\n\r\n'
        + b"\r\n--" * 3
        + os.urandom(17)
        + b"\r\n\r\n--\r\n\x00\r"
        + str(i).encode()
        + b"\n--"
    )


def _fd(tmp_path: Path, data: bytes, name: str = "src.bin") -> tuple[int, str]:
    p = tmp_path / name
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), hashlib.sha256(data).hexdigest()


def _rcd_received(drive: RcloneDrive) -> list[str]:
    """Names of the uploads rcd itself received (rcat's never reach it): transfers
    without a source remote (moves and digests are listed too, with one or as checks)."""
    body = drive.calls.rcd.call("core/transferred", {})
    return [
        str(t.get("name"))
        for t in body.get("transferred") or []
        if t.get("what") == "transferring" and "srcFs" not in t and not t.get("error")
    ]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_small_file_round_trip_through_rcd(local_drive: RcloneDrive, tmp_path: Path) -> None:
    data = os.urandom(5000)
    fd, sha = _fd(tmp_path, data)
    journaled: list[str] = []
    seen: list[tuple[int, int]] = []
    try:
        r = local_drive.upload_from_fd(
            fd,
            len(data),
            "docs/a.bin",
            expected_sha256=sha,
            progress=lambda d, t: seen.append((d, t)),
            journal=journaled.append,
        )
    finally:
        os.close(fd)
    root = Path(local_drive.spec)
    assert (root / "docs/a.bin").read_bytes() == data
    assert r.sha256 == sha and r.verification == "digest:sha256" and r.path_taken == "temp+move"
    assert r.digest == sha and r.size == len(data)
    assert journaled == [r.temp_path] and r.temp_path is not None
    assert r.temp_path.startswith("docs/" + TEMP_PREFIX)
    assert not [p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    assert seen[-1] == (len(data), len(data))
    assert r.temp_path in _rcd_received(local_drive)  # it went through rcd, not rcat


def test_the_cutoff_sends_larger_files_through_rcat(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    local_drive.transfers.rcd_upload_max = 1000
    local_drive.transfers.rcd_stream_backends = (
        frozenset()
    )  # else a local folder streams through rcd
    results = {}
    for size in (1000, 1001):
        data = os.urandom(size)
        fd, sha = _fd(tmp_path, data, f"s{size}")
        try:
            results[size] = local_drive.upload_from_fd(fd, size, f"s{size}", expected_sha256=sha)
        finally:
            os.close(fd)
        assert (Path(local_drive.spec) / f"s{size}").read_bytes() == data
    got = _rcd_received(local_drive)
    assert results[1000].temp_path in got
    assert results[1001].temp_path not in got


def test_a_larger_file_to_a_local_folder_streams_through_rcd(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    data = os.urandom(RCD_UPLOAD_MAX + 4097)  # no rclone rcat process per file
    fd, sha = _fd(tmp_path, data)
    try:
        r = local_drive.upload_from_fd(fd, len(data), "big.bin", expected_sha256=sha)
    finally:
        os.close(fd)
    assert (Path(local_drive.spec) / "big.bin").read_bytes() == data
    assert r.verification == "digest:sha256" and r.path_taken == "temp+move"
    assert r.temp_path in _rcd_received(local_drive)
    found = local_drive.stat("big.bin")  # the check after the move read it: no stat again
    assert found is not None and r.mtime == found.mtime


def test_a_changed_file_streamed_to_a_local_folder_leaves_nothing(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    approved = os.urandom(RCD_UPLOAD_MAX + 4097)  # streamed: all but the last chunk sent
    now = bytearray(approved)
    now[-1] ^= 1
    fd, _ = _fd(tmp_path, bytes(now))
    journaled: list[str] = []
    try:
        with pytest.raises(StaleEvidence):
            local_drive.upload_from_fd(
                fd,
                len(approved),
                "a.bin",
                expected_sha256=hashlib.sha256(approved).hexdigest(),
                journal=journaled.append,
            )
    finally:
        os.close(fd)
    assert journaled  # rcd had the temporary name; it answered, then the name was deleted
    assert _files(Path(local_drive.spec)) == {}


def test_above_the_local_stream_max_an_upload_goes_through_rcat(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    # rcd reads a streamed body in 4 KiB pieces: past this size that costs more CPU
    # than an rclone rcat process.
    data = os.urandom(RCD_STREAM_LOCAL_MAX + 1)
    fd, sha = _fd(tmp_path, data)
    try:
        r = local_drive.upload_from_fd(fd, len(data), "huge.bin", expected_sha256=sha)
    finally:
        os.close(fd)
    assert (Path(local_drive.spec) / "huge.bin").read_bytes() == data
    assert r.temp_path not in _rcd_received(local_drive)  # an rcat child carried it


def test_a_file_changed_after_approval_is_refused_before_rcd_sees_a_byte(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    approved = os.urandom(4000)
    now = bytearray(approved)
    now[-1] ^= 1  # same size, last byte differs: only the full digest can tell
    fd, _ = _fd(tmp_path, bytes(now))
    journaled: list[str] = []
    try:
        with pytest.raises(StaleEvidence) as e:
            local_drive.upload_from_fd(
                fd,
                len(approved),
                "a.bin",
                expected_sha256=hashlib.sha256(approved).hexdigest(),
                journal=journaled.append,
            )
        assert "nothing was written" in e.value.message
        grown, _ = _fd(tmp_path, approved + b"more", "grown.bin")
        try:  # the file grew since the proposal
            with pytest.raises(StaleEvidence):
                local_drive.upload_from_fd(
                    grown,
                    len(approved),
                    "b.bin",
                    expected_sha256=hashlib.sha256(approved).hexdigest(),
                )
        finally:
            os.close(grown)
    finally:
        os.close(fd)
    assert _files(Path(local_drive.spec)) == {}  # no target, no temp
    assert len(journaled) == 1  # the temp name was journaled before the refusal...
    assert _rcd_received(local_drive) == []  # ...and rcd never received an upload


def test_expected_digest_of_another_type_is_checked_too(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    data = os.urandom(3000)
    fd, sha = _fd(tmp_path, data)
    try:
        with pytest.raises(StaleEvidence):
            local_drive.upload_from_fd(
                fd, len(data), "a.bin", expected_sha256=sha, expected_digest=("sha1", "0" * 40)
            )
    finally:
        os.close(fd)
    assert _files(Path(local_drive.spec)) == {}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_and_content_land_byte_identical(
    local_drive: RcloneDrive, tmp_path: Path, name: str
) -> None:
    data = _content(len(name))
    fd, sha = _fd(tmp_path, data)
    target = f"dir #1 %41 'q'/{name}"
    try:
        r = local_drive.upload_from_fd(fd, len(data), target, expected_sha256=sha)
    finally:
        os.close(fd)
    assert r.temp_path in _rcd_received(local_drive)
    assert _files(Path(local_drive.spec)) == {target: data}


def test_webdav_round_trip_reads_back_hostile_names_and_content(
    webdav_server: ServedRemote, make_drive: Callable[..., RcloneDrive], tmp_path: Path, sub: str
) -> None:
    drive = make_drive(webdav_server.spec(sub))
    assert drive.capabilities().hash_types == ()  # verified by reading back
    expected = {}
    for i, name in enumerate(HOSTILE_NAMES[:5]):
        data = _content(i) * (i + 1)
        fd, sha = _fd(tmp_path, data, f"s{i}")
        try:
            r = drive.upload_from_fd(fd, len(data), f"in/{name}", expected_sha256=sha)
        finally:
            os.close(fd)
        assert r.verification == "readback:sha256" and r.sha256 == sha
        assert r.temp_path in _rcd_received(drive)
        expected[f"in/{name}"] = data
    assert _files(webdav_server.root / sub) == expected


@pytest.mark.timeout(180)
def test_four_threads_upload_fifty_files_each(local_drive: RcloneDrive, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    want: dict[str, bytes] = {}
    for t in range(4):
        for i in range(50):
            want[f"t{t}/f{i:02d} #{i}.bin"] = _content(i) + os.urandom(i * 97)
    errors: list[BaseException] = []
    local_drive.capabilities()

    def worker(t: int) -> None:
        try:
            for i in range(50):
                rel = f"t{t}/f{i:02d} #{i}.bin"
                data = want[rel]
                fd, sha = _fd(src, data, f"{t}-{i}")
                try:
                    r = local_drive.upload_from_fd(fd, len(data), rel, expected_sha256=sha)
                finally:
                    os.close(fd)
                assert r.sha256 == sha and r.verification == "digest:sha256"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert _files(Path(local_drive.spec)) == want  # every file, byte-identical, no temp
    assert len(_rcd_received(local_drive)) == 200


@pytest.mark.timeout(120)
def test_kill_all_aborts_an_rcd_upload_leaving_at_most_the_journaled_temp(
    make_drive: Callable[..., RcloneDrive], tmp_path: Path
) -> None:
    root = tmp_path / "remote"
    root.mkdir()
    # rcd reads the request at 64 KiB/s, so a 1 MiB upload is still running at the kill
    drive = make_drive(str(root), flags=("--bwlimit", "64K"))
    data = os.urandom(1 << 20)
    fd, sha = _fd(tmp_path, data)
    group = Children()
    journaled: list[str] = []
    failure: list[BaseException] = []

    def upload() -> None:
        with group.adopt():
            try:
                drive.upload_from_fd(
                    fd, len(data), "big.bin", expected_sha256=sha, journal=journaled.append
                )
            except BaseException as e:
                failure.append(e)

    th = threading.Thread(target=upload)
    th.start()
    deadline = time.monotonic() + 30
    while not journaled and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    assert group.kill_all() == 1  # the one request in flight
    th.join(60)
    os.close(fd)
    assert not th.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], DriveError)
    assert failure[0].error_code == "cancelled", failure[0]
    assert not (root / "big.bin").exists()
    left = [p.name for p in root.iterdir()]
    assert all(n == journaled[0] for n in left)  # at most the journaled temp
    drive.remove_temp(journaled[0])
    assert list(root.iterdir()) == []


def test_an_empty_file_goes_through_rcd(local_drive: RcloneDrive, tmp_path: Path) -> None:
    fd, sha = _fd(tmp_path, b"")
    try:
        r = local_drive.upload_from_fd(fd, 0, "empty", expected_sha256=sha)
    finally:
        os.close(fd)
    assert r.temp_path in _rcd_received(local_drive)
    assert _files(Path(local_drive.spec)) == {"empty": b""}
