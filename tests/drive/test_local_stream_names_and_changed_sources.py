"""The rcd stream to a local folder (`RcdUploads.upload_stream`, 2-48 MiB) under hostile input:
names, normalization twins, a source that changes, shrinks or becomes a symlink while it
streams, and the sizes at each cutoff. Real rclone, a local-folder drive that the tests
read directly.

Whatever the name, the object lands under exactly that name or is refused with a typed
error, and no temporary object stays; a source changed mid-stream is refused
(`StaleEvidence`) before its last chunk is sent and leaves nothing.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path
from typing import Literal

import pytest

from placet.drive import RcloneDrive
from placet.drive.routes import RCD_STREAM_LOCAL_MAX, RCD_UPLOAD_MAX
from placet.errors import AlreadyExists, PathRefused, PlacetError, StaleEvidence

SIZE = RCD_UPLOAD_MAX + 1  # the smallest upload that streams through rcd

_E_NFC = unicodedata.normalize("NFC", "é")
_E_NFD = unicodedata.normalize("NFD", "é")
HOSTILE = [
    "new\nline.bin",  # refused: a control character
    "100%.bin",
    "%2e%2e%2fup.bin",
    "#hash#.bin",
    "a%0Ab#c%.bin",
    'q"uo"te.bin',
    "back\\slash\\",
    "semi;colon; filename=evil.bin",
    "UTF-8''evil%20name.bin",
    " lead and trail ",
    "x" * 255,  # the longest name a local folder holds
    "ü" * 127 + "x",  # 255 bytes of UTF-8
    "日本語の名前" * 14 + "abc",  # 255 bytes
    f"caf{_E_NFD}.bin",
    ".placet-tmp-0123456789ab-x.bin",
]


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` (folders left out) by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _upload(drive: RcloneDrive, src: Path, size: int, name: str, sha: str, **kw: object) -> object:
    fd = os.open(src, os.O_RDONLY)
    try:
        return drive.upload_from_fd(fd, size, name, expected_sha256=sha, **kw)  # type: ignore[arg-type]
    finally:
        os.close(fd)


def _received(drive: RcloneDrive) -> list[str]:
    """Names of the uploads rcd itself received (rcat's never reach it)."""
    body = drive.calls.rcd.call("core/transferred", {})
    return [
        str(t.get("name"))
        for t in body.get("transferred") or []
        if t.get("what") == "transferring" and "srcFs" not in t and not t.get("error")
    ]


@pytest.mark.parametrize("name", HOSTILE, ids=lambda n: n.encode("unicode_escape").decode()[:40])
def test_a_hostile_name_streams_to_exactly_that_name_or_is_refused(
    local_drive: RcloneDrive, tmp_path: Path, name: str
) -> None:
    root = Path(local_drive.spec)
    data = os.urandom(SIZE)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    if any(unicodedata.category(c) == "Cc" for c in name):
        with pytest.raises(PathRefused) as ei:
            _upload(local_drive, src, SIZE, name, sha)
        assert ei.value.error_code == "path_invalid"
        assert _files(root) == {}
        return
    journaled: list[str] = []
    r = _upload(local_drive, src, SIZE, name, sha, journal=journaled.append)
    assert _files(root) == {name: data}  # that name, no temporary object
    assert journaled and journaled[0] in _received(local_drive)  # it streamed through rcd
    found = local_drive.stat(name)
    assert found is not None and found.size == SIZE
    assert getattr(r, "mtime") == found.mtime  # noqa: B009  the baseline's mtime


@pytest.mark.parametrize("first_form", ["NFC", "NFD"])
def test_a_normalization_twin_is_refused_before_any_byte(
    local_drive: RcloneDrive, tmp_path: Path, first_form: Literal["NFC", "NFD"]
) -> None:
    root = Path(local_drive.spec)
    first, second = os.urandom(SIZE), os.urandom(SIZE)
    name = f"caf{_E_NFC}.bin"
    one = unicodedata.normalize(first_form, name)
    other = unicodedata.normalize("NFD" if first_form == "NFC" else "NFC", name)
    src = tmp_path / "src.bin"
    src.write_bytes(first)
    _upload(local_drive, src, SIZE, one, hashlib.sha256(first).hexdigest())
    src.write_bytes(second)
    for replace in (False, True):
        journaled: list[str] = []
        with pytest.raises(AlreadyExists):
            _upload(
                local_drive, src, SIZE, other, hashlib.sha256(second).hexdigest(),
                journal=journaled.append, replace=replace,
            )  # fmt: skip
        assert journaled == []
        assert _files(root) == {one: first}


def _mutate(src: Path, how: str, at: int) -> None:
    if how == "grow":
        with open(src, "ab") as f:
            f.write(b"more")
    elif how == "truncate":
        os.truncate(src, 0)
    elif how == "shrink":
        os.truncate(src, at + 1)
    elif how == "flip":
        with open(src, "r+b") as f:
            f.seek(at + 1)
            b = f.read(1)
            f.seek(at + 1)
            f.write(bytes([b[0] ^ 1]))
    elif how == "symlink":  # the name now points elsewhere; the open descriptor keeps it
        target = src.with_name("elsewhere.bin")
        target.write_bytes(os.urandom(src.stat().st_size))
        tmp = src.with_name("link.tmp")
        os.symlink(target, tmp)
        os.replace(tmp, src)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["grow", "truncate", "shrink", "flip", "symlink"])
@pytest.mark.parametrize("at", [1 << 20, 3 << 20])
def test_a_source_changed_mid_stream_is_refused_and_leaves_nothing(
    local_drive: RcloneDrive, tmp_path: Path, how: str, at: int
) -> None:
    root = Path(local_drive.spec)
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
    if how == "symlink":
        _upload(local_drive, src, size, "a.bin", sha, progress=progress)
        assert changed
        assert _files(root) == {"a.bin": data}  # the approved bytes, never the link's
        assert not (root / "a.bin").is_symlink()
        return
    with pytest.raises(StaleEvidence):
        _upload(local_drive, src, size, "a.bin", sha, progress=progress)
    assert changed, "the file was not changed mid-stream"
    assert _files(root) == {}  # no target, no temporary object


@pytest.mark.parametrize(
    ("size", "through_rcd"),
    [
        (RCD_UPLOAD_MAX, True),  # in memory through rcd
        (RCD_UPLOAD_MAX + 1, True),  # the first streamed size
        (RCD_STREAM_LOCAL_MAX, True),  # the last streamed size
        (RCD_STREAM_LOCAL_MAX + 1, False),  # an rclone rcat child
    ],
    ids=["2MiB", "2MiB+1", "48MiB", "48MiB+1"],
)
def test_each_cutoff_lands_the_exact_bytes(
    local_drive: RcloneDrive, tmp_path: Path, size: int, through_rcd: bool
) -> None:
    root = Path(local_drive.spec)
    block = os.urandom(1 << 16)
    data = (block * (size // len(block) + 1))[:size]
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    seen: list[tuple[int, int]] = []
    r = _upload(
        local_drive, src, size, "b.bin", hashlib.sha256(data).hexdigest(),
        progress=lambda d, t: seen.append((d, t)),
    )  # fmt: skip
    assert (root / "b.bin").read_bytes() == data
    assert _files(root).keys() == {"b.bin"}
    temp = getattr(r, "temp_path")  # noqa: B009
    assert (temp in _received(local_drive)) is through_rcd
    assert seen[-1] == (size, size)
    found = local_drive.stat("b.bin")
    assert found is not None and getattr(r, "mtime") == found.mtime  # noqa: B009


def test_a_replacement_at_the_stream_max_keeps_the_old_bytes_when_refused(
    local_drive: RcloneDrive, tmp_path: Path
) -> None:
    """A replacement streamed to a temporary object and changed in its last chunk: the
    owner's file stays as it was and no temporary or backup object is left."""
    root = Path(local_drive.spec)
    old = os.urandom(1000)
    (root / "c.bin").write_bytes(old)
    size = RCD_STREAM_LOCAL_MAX
    data = os.urandom(size)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    changed: list[int] = []

    def progress(done: int, total: int) -> None:
        if not changed and done >= size - (1 << 20):
            changed.append(done)
            _mutate(src, "flip", size - 5)

    with pytest.raises(PlacetError):
        _upload(
            local_drive, src, size, "c.bin", hashlib.sha256(data).hexdigest(),
            progress=progress, replace=True,
        )  # fmt: skip
    assert changed
    assert _files(root) == {"c.bin": old}


@pytest.mark.parametrize(
    "folder",
    ["a #b", "100%/x%2Fy", "q?x=1&y=2+3", "日本/ü" * 3, "semi;colon/ lead "],
    ids=lambda f: f.encode("unicode_escape").decode()[:30],
)
def test_a_hostile_folder_takes_the_stream_to_exactly_that_folder(
    local_drive: RcloneDrive, tmp_path: Path, folder: str
) -> None:
    """The folder reaches rcd in the query string (`remote`), not in the part's header."""
    root = Path(local_drive.spec)
    (root / folder).mkdir(parents=True)
    data = os.urandom(SIZE)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    _upload(local_drive, src, SIZE, f"{folder}/n #%.bin", hashlib.sha256(data).hexdigest())
    assert _files(root) == {f"{folder}/n #%.bin": data}


@pytest.mark.parametrize("name", ["x" * 255, "ü" * 127 + "x"], ids=["ascii", "utf8"])
def test_a_255_byte_name_is_replaced_through_the_stream(
    local_drive: RcloneDrive, tmp_path: Path, name: str
) -> None:
    """Its temporary and backup names hold only part of it; the replacement lands whole
    and neither stays."""
    root = Path(local_drive.spec)
    src = tmp_path / "src.bin"
    for replace in (False, True):
        data = os.urandom(SIZE)
        src.write_bytes(data)
        _upload(local_drive, src, SIZE, name, hashlib.sha256(data).hexdigest(), replace=replace)
        assert _files(root) == {name: data}
