"""RcloneDrive over a local-folder remote: real rclone, real files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.drive import RcloneDrive
from placet.errors import (
    AlreadyExists,
    DriveError,
    NotFound,
    PathRefused,
    StaleEvidence,
    UsageError,
)
from placet.names import TEMP_PREFIX


def _src(tmp_path: Path, data: bytes, name: str = "src.bin") -> tuple[int, str]:
    p = tmp_path / name
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), hashlib.sha256(data).hexdigest()


def _root(drive: RcloneDrive) -> Path:
    return Path(drive.spec)


def test_capabilities_of_a_local_folder(local_drive: RcloneDrive) -> None:
    caps = local_drive.capabilities()
    assert caps.hash_types == ("sha256", "sha1", "md5")
    assert caps.backend == "local" and caps.hashes_on_demand
    assert caps.can_move and caps.server_side_replace
    assert caps.modtime_precision_ns == 1 and caps.case_insensitive is False


def test_upload_mkdir_download_round_trip(local_drive: RcloneDrive, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    fd, sha = _src(tmp_path, data)
    local_drive.mkdir("docs/deep")
    journaled: list[str] = []
    seen: list[tuple[int, int]] = []

    def journal(temp: str) -> None:  # the temp object does not exist yet when journaled
        journaled.append(temp)
        assert not (_root(local_drive) / temp).exists()

    r = local_drive.upload_from_fd(
        fd,
        len(data),
        "docs/deep/a.bin",
        expected_sha256=sha,
        progress=lambda done, total: seen.append((done, total)),
        journal=journal,
    )
    assert (r.verification, r.path_taken, r.sha256) == ("digest:sha256", "temp+move", sha)
    assert r.digest == sha and r.digest_type == "sha256"
    assert journaled == [r.temp_path] and r.temp_path is not None
    assert r.temp_path.startswith("docs/deep/" + TEMP_PREFIX) and r.temp_path.endswith("-a.bin")
    assert seen[-1] == (len(data), len(data)) and all(t == len(data) for _, t in seen)
    assert (_root(local_drive) / "docs/deep/a.bin").read_bytes() == data
    assert sorted(os.listdir(_root(local_drive) / "docs/deep")) == ["a.bin"]

    out = tmp_path / "out.bin"
    ofd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    d = local_drive.download_to_fd("docs/deep/a.bin", ofd, progress=None)
    os.close(ofd)
    assert out.read_bytes() == data
    assert d.sha256 == sha and d.size == len(data)
    assert d.digest_by_type["md5"] == hashlib.md5(data).hexdigest()
    assert d.digest_by_type["sha1"] == hashlib.sha1(data).hexdigest()


def test_upload_refuses_existing_target_and_replaces_when_asked(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    (_root(local_drive) / "a.txt").write_bytes(b"old")
    fd, sha = _src(tmp_path, b"new content")
    with pytest.raises(AlreadyExists):
        local_drive.upload_from_fd(fd, 11, "a.txt", expected_sha256=sha)
    assert (_root(local_drive) / "a.txt").read_bytes() == b"old"
    r = local_drive.upload_from_fd(fd, 11, "a.txt", expected_sha256=sha, replace=True)
    assert r.path_taken == "temp+move"
    assert (_root(local_drive) / "a.txt").read_bytes() == b"new content"
    (_root(local_drive) / "dir").mkdir()
    with pytest.raises(AlreadyExists, match="folder"):
        local_drive.upload_from_fd(fd, 11, "dir", expected_sha256=sha, replace=True)


def test_changed_local_file_is_stale_and_leaves_no_temp(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    data = b"x" * 5000
    fd, sha = _src(tmp_path, data)
    with pytest.raises(StaleEvidence):  # digest approved for other bytes
        local_drive.upload_from_fd(fd, len(data), "s.bin", expected_sha256="0" * 64)
    with pytest.raises(StaleEvidence):  # the file is shorter than the approved size
        local_drive.upload_from_fd(fd, len(data) + 10, "s.bin", expected_sha256=sha)
    with pytest.raises(StaleEvidence):  # ...or longer
        local_drive.upload_from_fd(fd, len(data) - 10, "s.bin", expected_sha256=sha)
    with pytest.raises(StaleEvidence):  # remote-type digest approved for other bytes
        local_drive.upload_from_fd(
            fd, len(data), "s.bin", expected_sha256=sha, expected_digest=("sha1", "ab" * 20)
        )
    assert os.listdir(_root(local_drive)) == []


def test_failing_upload_removes_its_temp_object(local_drive: RcloneDrive, tmp_path: Path) -> None:
    root = _root(local_drive)
    (root / "blocker").write_bytes(b"a file where a folder is needed")
    fd, sha = _src(tmp_path, b"payload")
    temps: list[str] = []
    with pytest.raises((AlreadyExists, NotFound)) as ei:  # rclone cannot create blocker/...
        local_drive.upload_from_fd(
            fd, 7, "blocker/x.txt", expected_sha256=sha, journal=temps.append
        )
    assert "rclone_message" in ei.value.details
    assert temps and not (root / temps[0]).exists()
    assert sorted(os.listdir(root)) == ["blocker"]

    def boom(done: int, total: int) -> None:  # the caller's callback fails mid-transfer
        raise RuntimeError("progress callback failed")

    data = os.urandom(3 << 20)
    fd2, sha2 = _src(tmp_path, data, "big.bin")
    with pytest.raises(RuntimeError):
        local_drive.upload_from_fd(fd2, len(data), "big.bin", expected_sha256=sha2, progress=boom)
    assert sorted(os.listdir(root)) == ["blocker"]


def test_temp_objects_never_listed_and_cleanup(local_drive: RcloneDrive) -> None:
    root = _root(local_drive)
    (root / "f").mkdir()
    (root / "f" / "real.txt").write_bytes(b"r")
    stale = root / "f" / f"{TEMP_PREFIX}0123456789ab-real.txt"
    stale.write_bytes(b"partial")
    fresh = root / "f" / f"{TEMP_PREFIX}ba9876543210-other.txt"
    fresh.write_bytes(b"in flight")
    old = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    os.utime(stale, (old, old))
    entries, cursor = local_drive.list_folder("f", include_digest=True)
    assert [e.name for e in entries] == ["real.txt"] and cursor is None
    assert [e.path for e in local_drive.list_tree("")] == ["f", "f/real.txt"]
    assert local_drive.cleanup_temps("f") == [f"f/{stale.name}"]
    assert not stale.exists() and fresh.exists()
    assert local_drive.remove_temp(f"f/{fresh.name}") is True
    assert local_drive.remove_temp(f"f/{fresh.name}") is False
    with pytest.raises(UsageError, match="not a placet temp"):
        local_drive.remove_temp("f/real.txt")
    assert (root / "f" / "real.txt").exists()


def test_list_folder_pages_with_cursor(local_drive: RcloneDrive) -> None:
    root = _root(local_drive)
    names = [f"n{i:02d}" for i in range(7)]
    for n in names:
        (root / n).write_bytes(n.encode())
    (root / "sub").mkdir()
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = local_drive.list_folder("", cursor=cursor, limit=3)
        seen += [e.name for e in page]
        pages += 1
        if cursor is None:
            break
    assert seen == [*names, "sub"] and pages == 3
    _, c = local_drive.list_folder("", limit=3)
    assert c is not None
    with pytest.raises(UsageError, match="belongs to folder"):
        local_drive.list_folder("sub", cursor=c)
    with pytest.raises(UsageError, match="malformed"):
        local_drive.list_folder("", cursor="not-a-cursor")


def test_listing_digests_are_the_preferred_type_and_follow_changes(
    local_drive: RcloneDrive,
) -> None:
    root = _root(local_drive)
    (root / "a.txt").write_bytes(b"one")
    [e] = local_drive.list_tree("")
    assert e.digests == {"sha256": hashlib.sha256(b"one").hexdigest()}
    (root / "a.txt").write_bytes(b"three")  # new size: the cached digest no longer applies
    [e] = local_drive.list_tree("")
    assert e.digests == {"sha256": hashlib.sha256(b"three").hexdigest()}
    many = 80  # more misses than the per-file threshold: one hashed listing
    for i in range(many):
        (root / f"m{i}").write_bytes(str(i).encode())
    got = {e.name: e.digests["sha256"] for e in local_drive.list_tree("") if e.name != "a.txt"}
    assert got == {f"m{i}": hashlib.sha256(str(i).encode()).hexdigest() for i in range(many)}


def test_stat_mkdir_read_head_digest_of(local_drive: RcloneDrive) -> None:
    root = _root(local_drive)
    assert local_drive.stat("nope") is None and local_drive.stat("no/such/x") is None
    local_drive.mkdir("a/b")
    local_drive.mkdir("a/b")  # an existing folder is fine
    assert (root / "a" / "b").is_dir()
    (root / "a" / "t.txt").write_bytes(b"hello world")
    e = local_drive.stat("a/t.txt", include_digest=True)
    assert e is not None and (e.size, e.is_dir, e.name) == (11, False, "t.txt")
    assert e.digests["sha1"] == hashlib.sha1(b"hello world").hexdigest()
    with pytest.raises(AlreadyExists):
        local_drive.mkdir("a/t.txt")
    assert local_drive.read_head("a/t.txt", 5) == b"hello"
    with pytest.raises(NotFound):
        local_drive.read_head("a/missing.txt", 5)
    with pytest.raises(NotFound, match="folder"):
        local_drive.read_head("a/b", 5)
    assert local_drive.digest_of("a/t.txt", "md5") == hashlib.md5(b"hello world").hexdigest()
    assert local_drive.digest_of("a/t.txt", "whirlpool") is None
    with pytest.raises(NotFound):
        local_drive.digest_of("a/missing.txt", "md5")
    with pytest.raises(NotFound):
        local_drive.list_folder("a/t.txt")
    with pytest.raises(NotFound):
        local_drive.list_folder("absent")
    local_drive.clear_caches()
    assert local_drive.stat("a/t.txt") is not None


def test_download_of_a_folder_or_missing_file_is_not_found(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    (_root(local_drive) / "d").mkdir()
    (_root(local_drive) / "d" / "inner.txt").write_bytes(b"must not be concatenated")
    fd = os.open(tmp_path / "o", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    for path in ("d", "missing"):
        with pytest.raises(NotFound):
            local_drive.download_to_fd(path, fd)
    assert os.fstat(fd).st_size == 0


@pytest.mark.parametrize("bad", ["-rf", ":local:/etc", "a/../b", "x\x07"])
def test_agent_paths_cannot_become_arguments(local_drive: RcloneDrive, bad: str) -> None:
    with pytest.raises(PathRefused):
        local_drive.stat(bad)
    with pytest.raises(PathRefused):
        local_drive.mkdir(bad)


def test_empty_file_and_long_name(local_drive: RcloneDrive, tmp_path: Path) -> None:
    fd, sha = _src(tmp_path, b"")
    r = local_drive.upload_from_fd(fd, 0, "empty", expected_sha256=sha)
    assert r.size == 0 and (_root(local_drive) / "empty").read_bytes() == b""
    name = "é" * 127  # 254 bytes: the temp name must be cut to fit 255 bytes
    r = local_drive.upload_from_fd(fd, 0, name, expected_sha256=sha)
    assert r.temp_path is not None and len(r.temp_path.encode()) <= 255
    assert (_root(local_drive) / name).exists()


def test_closed_drive_refuses(make_drive: Callable[..., RcloneDrive], tmp_path: Path) -> None:
    d = make_drive(str(tmp_path))
    d.capabilities()
    pid = d.rcd_pid
    assert pid is not None
    d.close()
    assert d.rcd_pid is None
    with pytest.raises(Exception, match="closed"):
        d.stat("x")


def test_download_onto_a_full_disk_is_a_local_io_error(local_drive: RcloneDrive) -> None:
    (_root(local_drive) / "f.bin").write_bytes(os.urandom(100_000))
    fd = os.open("/dev/full", os.O_WRONLY)  # every write fails with ENOSPC
    try:
        with pytest.raises(DriveError) as ei:
            local_drive.download_to_fd("f.bin", fd)
    finally:
        os.close(fd)
    assert ei.value.error_code == "local_io_error" and "space" in ei.value.message


def test_a_drive_root_not_created_yet_lists_empty(
    make_drive: Callable[..., RcloneDrive], tmp_path: Path
) -> None:
    drive = make_drive(str(tmp_path / "not-yet"))
    assert drive.list_folder("") == ([], None) and drive.list_tree("") == []
    with pytest.raises(NotFound):
        drive.list_folder("sub")


def test_list_rows_is_the_lean_listing(local_drive: RcloneDrive) -> None:
    root = _root(local_drive)
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f.txt").write_bytes(b"deep")
    (root / "top.txt").write_bytes(b"top")
    (root / f"{TEMP_PREFIX}0123456789ab-top.txt").write_bytes(b"in flight")
    rows = {r[0]: r for r in local_drive.list_rows("")}
    assert set(rows) == {"d", "d/e", "d/e/f.txt", "top.txt"}  # the temp object left out
    _, is_dir, size, mtime, digest = rows["d/e/f.txt"]
    assert (is_dir, size, digest) == (False, 4, None) and mtime and mtime.endswith("Z")
    assert rows["d"][1:3] == (True, -1)
    top = local_drive.list_rows("", recurse=False, digest_type="SHA256")
    assert {r[0]: r[4] for r in top} == {"d": None, "top.txt": hashlib.sha256(b"top").hexdigest()}
    assert {r[0] for r in local_drive.list_rows("d")} == {"d/e", "d/e/f.txt"}
    with pytest.raises(NotFound):
        local_drive.list_rows("nope")
    with pytest.raises(PathRefused):
        local_drive.list_rows("-x")


def test_listing_digests_come_from_the_digest_store_handed_over(
    local_drive: RcloneDrive,
) -> None:
    """One cache: the drive reads and writes the store it is given (the sync service
    hands over its persistent one), reusing an entry only while size and mtime match."""
    from placet.drive import MemoryDigestStore

    root = _root(local_drive)
    (root / "a.txt").write_bytes(b"one")
    store = MemoryDigestStore()
    local_drive.use_digest_store(store)
    [e] = local_drive.list_tree("")
    real = hashlib.sha256(b"one").hexdigest()
    assert e.digests == {"sha256": real}
    assert store.cached("sha256")["a.txt"] == (3, e.mtime, real)  # remembered there
    store.remember("sha256", [("a.txt", 3, str(e.mtime), "f" * 64)])
    [e] = local_drive.list_tree("")
    assert e.digests == {"sha256": "f" * 64}  # taken from the store, not rehashed
    os.utime(root / "a.txt", (1_000_000_000, 1_000_000_000))  # new mtime: a miss
    [e] = local_drive.list_tree("")
    assert e.digests == {"sha256": real}
    assert store.cached("sha256")["a.txt"][2] == real
