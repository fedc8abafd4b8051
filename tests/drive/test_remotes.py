"""RcloneDrive over network remotes served by real `rclone serve webdav|sftp`."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive
from placet.errors import DriveUnavailable, NotFound, PlacetError, StaleEvidence
from placet.names import TEMP_PREFIX

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


MakeDrive = Callable[..., RcloneDrive]


def _src(tmp_path: Path, data: bytes) -> tuple[int, str]:
    p = tmp_path / "src.bin"
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), hashlib.sha256(data).hexdigest()


def _round_trip(drive: RcloneDrive, tmp_path: Path, served_root: Path, data: bytes) -> None:
    fd, sha = _src(tmp_path, data)
    drive.mkdir("in/box")
    r = drive.upload_from_fd(fd, len(data), "in/box/f.bin", expected_sha256=sha)
    assert r.path_taken == "temp+move" and r.sha256 == sha
    assert (served_root / "in/box/f.bin").read_bytes() == data
    assert [e.name for e in drive.list_folder("in/box")[0]] == ["f.bin"]
    out = os.open(tmp_path / "out.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    d = drive.download_to_fd("in/box/f.bin", out)
    os.close(out)
    assert d.sha256 == sha and (tmp_path / "out.bin").read_bytes() == data
    return None


def test_webdav_has_no_digests_so_uploads_are_read_back(
    webdav_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    drive = make_drive(webdav_server.spec(sub))
    caps = drive.capabilities()
    assert caps.hash_types == () and caps.backend == "webdav"
    assert caps.modtime_precision_ns == 1_000_000_000
    data = os.urandom(200_000)
    _round_trip(drive, tmp_path, webdav_server.root / sub, data)
    fd, sha = _src(tmp_path, b"second")
    r = drive.upload_from_fd(fd, 6, "in/box/g.txt", expected_sha256=sha)
    assert r.verification == "readback:sha256"
    assert r.digest is None and r.digest_type is None
    [entry] = [e for e in drive.list_folder("in/box", include_digest=True)[0] if e.name == "g.txt"]
    assert entry.digests == {}


def test_webdav_size_only_verification_when_readback_is_off(
    webdav_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    drive = make_drive(webdav_server.spec(sub), verify_readback=False)
    fd, sha = _src(tmp_path, b"sized")
    assert drive.upload_from_fd(fd, 5, "s.txt", expected_sha256=sha).verification == "size"


def test_sftp_digest_matches_the_local_one(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    spec, env = sftp_server.named(sub)
    drive = make_drive(spec, env)
    caps = drive.capabilities()
    assert caps.hash_types == ("sha1", "md5") and caps.hashes_on_demand
    data = os.urandom(150_000)
    _round_trip(drive, tmp_path, sftp_server.root / sub, data)
    fd, sha = _src(tmp_path, data)
    sha1 = hashlib.sha1(data).hexdigest()
    r = drive.upload_from_fd(
        fd, len(data), "c.bin", expected_sha256=sha, expected_digest=("sha1", sha1.upper())
    )
    assert (r.verification, r.digest_type, r.digest) == ("digest:sha1", "sha1", sha1)
    assert drive.digest_of("c.bin", "md5") == hashlib.md5(data).hexdigest()
    [entry] = [e for e in drive.list_tree("", include_digest=True) if e.path == "c.bin"]
    assert entry.digests == {"sha1": sha1}


def test_temp_objects_hidden_on_sftp(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str
) -> None:
    (sftp_server.root / sub).mkdir()
    (sftp_server.root / sub / f"{TEMP_PREFIX}aaaaaaaaaaaa-x").write_bytes(b"t")
    (sftp_server.root / sub / "x").write_bytes(b"x")
    drive = make_drive(sftp_server.spec(sub))
    assert [e.name for e in drive.list_folder("")[0]] == ["x"]
    assert [e.name for e in drive.list_tree("")] == ["x"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("rcd_upload_max", "failure_key"), [(-1, "exit_code"), (None, "http_status")]
)
def test_unreachable_remote_is_retryable(
    start_server: Callable[[str], ServedRemote],
    make_drive: MakeDrive,
    tmp_path: Path,
    rcd_upload_max: int | None,
    failure_key: str,
) -> None:
    served = start_server("webdav")
    drive = make_drive(served.spec())
    if rcd_upload_max is not None:  # -1: through `rclone rcat`; default: through rcd
        drive.transfers.rcd_upload_max = rcd_upload_max
    assert drive.list_folder("")[0] == []
    fd, sha = _src(tmp_path, b"abc")
    temps: list[str] = []

    def journal_then_vanish(temp: str) -> None:  # the server dies as the transfer starts
        temps.append(temp)
        served.stop()

    with pytest.raises(DriveUnavailable) as ei:  # from rcat's exit or rcd's answer
        drive.upload_from_fd(fd, 3, "a.txt", expected_sha256=sha, journal=journal_then_vanish)
    assert ei.value.retryable and failure_key in ei.value.details
    assert temps and not list(served.root.iterdir())
    with pytest.raises(DriveUnavailable) as ei:  # from rcd's answer
        drive.list_folder("")
    assert ei.value.retryable and ei.value.error_code == "drive_unavailable"
    assert "connection refused" in ei.value.details["rclone_message"]
    with pytest.raises(DriveUnavailable):
        drive.read_head("a.txt", 3)


class _Refuser:
    """A listener on `port` of 127.0.0.1 that reads each request's first line and
    closes the connection without an answer, keeping the methods it saw: what a web
    server that dies at every request looks like."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.methods: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    self.methods.append(conn.recv(64).split(b" ", 1)[0].decode("ascii", "replace"))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.timeout(60)
def test_an_upload_through_rcd_puts_once_like_rcat(
    start_server: Callable[[str], ServedRemote], make_drive: MakeDrive, tmp_path: Path
) -> None:
    """rcd's upload of a small file goes through rclone's `Copy`, which tries the whole
    upload again up to `--low-level-retries` times: nine PUTs and ~10 s against a dead
    WebDAV server, inside an agent's or the owner's wait. placet sends
    ``LowLevelRetries: 1`` with the request, so the PUT is tried once, as `rclone rcat`
    tries it, and the op fails retryable at once."""
    served = start_server("webdav")
    drive = make_drive(served.spec())
    assert drive.list_folder("")[0] == []
    fd, sha = _src(tmp_path, b"abc")
    refuser: list[_Refuser] = []

    def journal_then_break(temp: str) -> None:  # the server dies; a refuser takes its port
        served.stop()
        refuser.append(_Refuser(served.port))

    try:
        with pytest.raises(DriveUnavailable) as ei:
            drive.upload_from_fd(fd, 3, "a.txt", expected_sha256=sha, journal=journal_then_break)
        methods = list(refuser[0].methods)
    finally:
        for r in refuser:
            r.close()
    assert ei.value.retryable
    assert methods.count("PUT") == 1, methods


def test_errors_never_carry_the_obscured_password(
    webdav_server: ServedRemote,
    start_server: Callable[[str], ServedRemote],
    make_drive: MakeDrive,
    sub: str,
) -> None:
    drive = make_drive(webdav_server.spec(sub))
    with pytest.raises(NotFound) as ei:
        drive.read_head("missing.txt", 10)
    served = start_server("webdav")
    down = make_drive(served.spec())
    down.capabilities()
    served.stop()
    errors: list[PlacetError] = [ei.value]
    for call in (lambda: down.list_tree(""), lambda: down.read_head("x", 1)):
        with pytest.raises(PlacetError) as e2:
            call()
        errors.append(e2.value)
    bad = make_drive(f":webdav,url='http://127.0.0.1:1',user=u,pass={served.obscured}:")
    with pytest.raises(PlacetError) as e3:
        bad.list_folder("")
    errors.append(e3.value)
    for err in errors:
        text = f"{err.message} {err.details} {err!r} {err.to_dict()}"
        assert served.obscured not in text and webdav_server.obscured not in text
        assert served.password not in text
    assert "connection refused" in e3.value.details["rclone_message"]  # the useful part stays
    assert served.obscured not in repr(bad)


def test_s3_replacement_goes_straight_onto_the_target(
    start_server: Callable[[str], ServedRemote], make_drive: MakeDrive, tmp_path: Path
) -> None:
    served = start_server("s3")
    drive = make_drive(served.spec("sub"))
    caps = drive.capabilities()
    assert caps.hash_types == ("md5",)
    assert not caps.can_move and not caps.server_side_replace
    on_disk = served.root / "bucket" / "sub" / "f.txt"
    fd, sha = _src(tmp_path, b"version one")
    journaled: list[str] = []
    r = drive.upload_from_fd(fd, 11, "f.txt", expected_sha256=sha, journal=journaled.append)
    assert (r.path_taken, r.verification) == ("temp+move", "digest:md5")  # a new file
    assert journaled == [r.temp_path] and on_disk.read_bytes() == b"version one"
    data = b"version two, longer"
    fd, sha = _src(tmp_path, data)
    journaled.clear()
    r = drive.upload_from_fd(
        fd, len(data), "f.txt", expected_sha256=sha, replace=True, journal=journaled.append
    )
    assert (r.path_taken, r.verification, r.temp_path) == ("direct-replace", "digest:md5", None)
    assert r.digest == hashlib.md5(data).hexdigest() and journaled == []
    assert on_disk.read_bytes() == data
    assert sorted(p.name for p in on_disk.parent.iterdir()) == ["f.txt"]
    big = os.urandom(3 << 20)  # several chunks: the refusal comes before the last one
    fd, _ = _src(tmp_path, big)
    with pytest.raises(StaleEvidence):  # the local file is not what was approved
        drive.upload_from_fd(fd, len(big), "f.txt", expected_sha256="0" * 64, replace=True)
    assert on_disk.read_bytes() == data  # the target never received the unapproved bytes


def test_content_sha256_reads_the_bytes_on_a_remote_without_digests(
    webdav_server: ServedRemote, make_drive: MakeDrive, sub: str
) -> None:
    """`content_sha256` hashes the bytes rclone downloads (through rcd), on a remote
    that stores no digest; a missing file is NotFound, a folder is refused."""
    drive = make_drive(webdav_server.spec(sub))
    (webdav_server.root / sub / "d").mkdir(parents=True)
    data = os.urandom(300_000)
    (webdav_server.root / sub / "d/f.bin").write_bytes(data)
    assert drive.content_sha256("d/f.bin") == hashlib.sha256(data).hexdigest()
    with pytest.raises(NotFound):
        drive.content_sha256("d/nope.bin")
    with pytest.raises(PlacetError):
        drive.content_sha256("d")
