"""Hostile names and files that change mid-stream, through the rcd stream to sftp
(`RcdUploads.upload_stream`): real rclone, `rclone serve sftp` of a local folder that the tests
read directly.

Names reach rclone only inside the multipart header (RFC 2231 ``filename*``): whatever
the name, the object lands under exactly that name or is refused with a typed error, and
no temporary object stays. A file that grows, shrinks, is truncated or has a byte
changed while it streams is refused (`StaleEvidence`) before its last chunk is sent, and
leaves nothing; a file renamed over mid-stream keeps streaming the approved bytes from
the open descriptor.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive
from placet.drive.routes import RCD_UPLOAD_MAX
from placet.errors import AlreadyExists, PathRefused, StaleEvidence

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

MakeDrive = Callable[..., RcloneDrive]
SIZE = RCD_UPLOAD_MAX + 1  # the smallest upload that streams through rcd

_E_NFC = unicodedata.normalize("NFC", "é")
_E_NFD = unicodedata.normalize("NFD", "é")
HOSTILE = [
    'q"uo"te.bin',
    "back\\slash\\",
    "semi;colon; filename=evil.bin",
    "100%.bin",
    "%2e%2e%2fup.bin",
    "UTF-8''evil%20name.bin",
    "filename*=UTF-8''x.bin",
    "=?utf-8?q?encoded?=.bin",
    "x\r\n--boundary--",  # refused: a control character
    " lead and trail ",
    "tab\tname",  # refused: a control character
    'x\r\nContent-Disposition: form-data; name="file"; filename="evil"',  # refused
    "ü" * 127,  # 254 bytes of UTF-8: the temporary name holds only part of it
    "日本語の名前" * 14,  # 252 bytes
    f"caf{_E_NFC}.bin",
    f"caf{_E_NFD}.bin",
    ".placet-tmp-",
    ".placet-tmp-0123456789ab-x.bin",
    ".placet-tmp-keep-0123456789ab-x.bin",
]


def _files(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))}


def _upload(drive: RcloneDrive, src: Path, size: int, name: str, sha: str, **kw: object) -> object:
    fd = os.open(src, os.O_RDONLY)
    try:
        return drive.upload_from_fd(fd, size, name, expected_sha256=sha, **kw)  # type: ignore[arg-type]
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: n.encode("unicode_escape").decode()[:40])
def test_a_hostile_name_lands_under_exactly_that_name_or_is_refused(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str, name: str
) -> None:
    drive = make_drive(sftp_server.spec(sub))
    data = os.urandom(SIZE)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    if any(unicodedata.category(c) == "Cc" for c in name):
        with pytest.raises(PathRefused) as ei:
            _upload(drive, src, SIZE, name, sha)
        assert ei.value.error_code == "path_invalid"
        assert _files(sftp_server.root / sub) == {}
        return
    journaled: list[str] = []
    _upload(drive, src, SIZE, name, sha, journal=journaled.append)
    assert _files(sftp_server.root / sub) == {name: data}  # that name, no temporary object
    assert len(journaled) == 1
    got = drive.stat(name)
    assert got is not None and got.size == SIZE


@pytest.mark.parametrize("first_form", ["NFC", "NFD"])
def test_a_name_differing_only_by_normalization_is_refused_before_any_byte(
    sftp_server: ServedRemote, make_drive: MakeDrive, tmp_path: Path, sub: str, first_form: str
) -> None:
    """rclone serve sftp resolves ``café`` NFD to ``café`` NFC on some calls and not on
    others: a second upload could land beside the first, or (1 run in ~40) have its
    check after the move hash the first object, and the undo then deleted both, the
    first never approved. It is refused (`AlreadyExists`) before any byte is sent, new
    or as a replacement, and the first stays as it was."""
    drive = make_drive(sftp_server.spec(sub))
    first, second = os.urandom(SIZE), os.urandom(SIZE)
    name = f"caf{_E_NFC}.bin"
    one, other = (
        unicodedata.normalize(first_form, name),
        unicodedata.normalize("NFD" if first_form == "NFC" else "NFC", name),
    )
    src = tmp_path / "src.bin"
    src.write_bytes(first)
    _upload(drive, src, SIZE, one, hashlib.sha256(first).hexdigest())
    src.write_bytes(second)
    for replace in (False, True):
        journaled: list[str] = []
        with pytest.raises(AlreadyExists) as ei:
            _upload(
                drive, src, SIZE, other, hashlib.sha256(second).hexdigest(),
                journal=journaled.append, replace=replace,
            )  # fmt: skip
        assert journaled == [] and ei.value.details["existing_name"] == one
        assert _files(sftp_server.root / sub) == {one: first}


def _mutate(src: Path, how: str, at: int) -> None:
    if how == "grow":
        with open(src, "ab") as f:
            f.write(b"more")
    elif how == "shrink":
        os.truncate(src, at + 1)
    elif how == "truncate":
        os.truncate(src, 0)
    elif how == "flip":
        with open(src, "r+b") as f:
            f.seek(at + 1)
            b = f.read(1)
            f.seek(at + 1)
            f.write(bytes([b[0] ^ 1]))
    elif how == "rename":  # another file takes the name; the open descriptor keeps the old
        other = src.with_name("other.bin")
        other.write_bytes(os.urandom(src.stat().st_size))
        os.replace(other, src)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["grow", "shrink", "truncate", "flip", "rename"])
@pytest.mark.parametrize("at", [1 << 20, 2 << 20, 3 << 20, 4 << 20])
def test_a_file_changed_mid_stream_is_refused_and_leaves_nothing(
    sftp_server: ServedRemote,
    make_drive: MakeDrive,
    tmp_path: Path,
    sub: str,
    how: str,
    at: int,
) -> None:
    """`at`: the bytes sent (progress, 1 MiB chunks) when the file changed: below, at
    and above rcd's 2 MiB streaming cutoff, and with all but the last 3 bytes sent."""
    drive = make_drive(sftp_server.spec(sub))
    size = (4 << 20) + 3
    data = os.urandom(size)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    changed: list[int] = []

    def progress(done: int, total: int) -> None:
        if not changed and done == at:
            changed.append(done)
            _mutate(src, how, done)

    sha = hashlib.sha256(data).hexdigest()
    if how == "rename":
        r = _upload(drive, src, size, "a.bin", sha, progress=progress)
        assert changed and r is not None
        assert _files(sftp_server.root / sub) == {"a.bin": data}  # the approved bytes
        return
    with pytest.raises(StaleEvidence) as ei:
        _upload(drive, src, size, "a.bin", sha, progress=progress)
    assert changed, "the file was not changed mid-stream"
    assert "nothing was written" in ei.value.message or "changed since" in ei.value.message
    assert _files(sftp_server.root / sub) == {}  # no target, no temporary object
    assert drive.stat("a.bin") is None
