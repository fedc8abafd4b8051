"""Batches of small new files (`Batches.upload_new_batch`): one upload request with a
part per file, every file verified and moved into place on its own terms. Real rclone
against a local-folder remote.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive, UploadResult
from placet.drive.batches import NewFile
from placet.errors import AlreadyExists, StaleEvidence, UsageError
from placet.names import TEMP_PREFIX

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

NAMES = ["plain.txt", "ünïcödé café.txt", "with spaces #%41.txt", "[br]{ace}*?.txt", "x" * 200]


def _file(tmp_path: Path, name: str, data: bytes, sha: str | None = None) -> tuple[int, str]:
    p = tmp_path / "src" / name
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(data)
    return os.open(p, os.O_RDONLY), sha or hashlib.sha256(data).hexdigest()


def test_a_batch_stores_each_approved_file_and_refuses_the_others(
    tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    remote = tmp_path / "drive"
    (remote / "box").mkdir(parents=True)
    drive = make_drive(str(remote))
    assert drive.batches.can_batch()
    datas = [b"--boundary\r\n\x00" + os.urandom(50 + i) + b"\r\n--" for i in range(len(NAMES))]
    files, fds = [], []
    for i, (name, data) in enumerate(zip(NAMES, datas, strict=True)):
        fd, sha = _file(tmp_path, name, data, "0" * 64 if i == 1 else None)
        fds.append(fd)
        files.append(NewFile(fd, len(data), f"box/{name}", sha))
    (remote / "box" / NAMES[2]).write_bytes(b"appeared")  # the target appeared meanwhile
    journaled: list[list[tuple[int, str]]] = []

    def journal(temps: list[tuple[int, str]]) -> None:
        assert not [n for n in os.listdir(remote / "box") if n.startswith(TEMP_PREFIX)]
        journaled.append(temps)

    try:
        out = drive.batches.upload_new_batch(files, journal=journal)
    finally:
        for fd in fds:
            os.close(fd)

    # Every temporary name was journaled once, before any byte was sent; the file whose
    # bytes are not the approved ones sent nothing.
    [temps] = journaled
    assert sorted(i for i, _ in temps) == [0, 2, 3, 4]
    assert all(t.startswith(f"box/{TEMP_PREFIX}") for _, t in temps)
    assert isinstance(out[1], StaleEvidence) and not (remote / "box" / NAMES[1]).exists()
    assert isinstance(out[2], AlreadyExists)
    assert (remote / "box" / NAMES[2]).read_bytes() == b"appeared"
    for i in (0, 3, 4):
        r = out[i]
        assert isinstance(r, UploadResult), r
        assert r.verification == "digest:sha256" and r.path_taken == "temp+move"
        assert r.digest == r.sha256 == hashlib.sha256(datas[i]).hexdigest()
        assert (remote / "box" / NAMES[i]).read_bytes() == datas[i]
        assert r.mtime is not None
    assert [n for n in os.listdir(remote / "box") if n.startswith(TEMP_PREFIX)] == []


def test_a_batch_of_several_folders_stores_each_file_in_its_own(
    tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """Files of several folders share each request; each ends in its folder, verified,
    and one whose target appeared is refused alone; no temporary name is left."""
    remote = tmp_path / "drive"
    for d in ("a", "a/b", "c"):
        (remote / d).mkdir(parents=True)
    (remote / "c" / "two.txt").write_bytes(b"appeared")
    drive = make_drive(str(remote))
    paths = ["a/one.txt", "a/b/one.txt", "a/b/two.txt", "c/one.txt", "c/two.txt"]
    datas = [os.urandom(10 + i) for i in range(len(paths))]
    fds = []
    try:
        files = []
        for i, (path, data) in enumerate(zip(paths, datas, strict=True)):
            fd, sha = _file(tmp_path, f"{i}.bin", data)
            fds.append(fd)
            files.append(NewFile(fd, len(data), path, sha))
        out = drive.batches.upload_new_batch(files)
    finally:
        for fd in fds:
            os.close(fd)
    assert isinstance(out[4], AlreadyExists)
    assert (remote / "c" / "two.txt").read_bytes() == b"appeared"
    for i in range(4):
        assert isinstance(out[i], UploadResult), out[i]
        assert (remote / paths[i]).read_bytes() == datas[i]
    assert [p for p in remote.rglob(f"{TEMP_PREFIX}*")] == []


def test_a_listing_by_names_finds_exactly_those_names(
    tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """`targets_listed` finds each name asked for, whatever regexp or glob characters
    it holds, and no other name of the folder (``a.c`` does not find ``abc``)."""
    remote = tmp_path / "drive"
    asked = [*NAMES, "a.c", "x}", "y}}", "(p|q)", "^$", "back\\slash", "+{{z}}"]
    others = ["abc", "p", "q", "x", "plain.txt.bak", "A.C", "y}}}", "(p|q)2"]
    (remote / "box").mkdir(parents=True)
    for name in [*asked, *others]:
        (remote / "box" / name).write_bytes(name.encode())
    drive = make_drive(str(remote))
    t = drive.capabilities().hash_types[0]
    listed = drive.batches.targets_listed([f"box/{n}" for n in [*asked, "absent.txt"]], t)
    assert sorted(listed) == sorted(f"box/{n}" for n in asked)
    assert all(e.digests.get(t) for e in listed.values())


def test_a_batch_takes_small_files_only(
    tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    remote = tmp_path / "drive"
    remote.mkdir()
    drive = make_drive(str(remote))
    fd, sha = _file(tmp_path, "a.txt", b"a")
    try:
        with pytest.raises(UsageError):
            drive.batches.upload_new_batch(
                [NewFile(fd, drive.transfers.rcd_upload_max + 1, "x/a.txt", sha)]
            )
    finally:
        os.close(fd)
    assert list(remote.iterdir()) == []


@pytest.mark.parametrize("first_form", ["NFC", "NFD"])
def test_a_batch_refuses_a_name_differing_only_by_normalization_before_any_byte(
    sftp_server: ServedRemote,
    make_drive: Callable[..., RcloneDrive],
    tmp_path: Path,
    sub: str,
    first_form: str,
) -> None:
    """rclone serve sftp resolves ``café`` NFD to ``café`` NFC on some calls and not on
    others: a batch's new ``café`` beside its twin was moved onto the twin, failed its
    check after the move and was removed, taking the owner's file with it (every run,
    both forms, before this was refused). A file whose name has a twin in the folder or
    earlier in the batch is refused (`AlreadyExists`, ``existing_name``) before any byte
    is sent; the rest of the batch lands; the twin stays as it was."""
    name = "caf\u00e9.bin"
    one = unicodedata.normalize(first_form, name)
    other = unicodedata.normalize("NFD" if first_form == "NFC" else "NFC", name)
    folder = sftp_server.root / sub
    folder.mkdir(parents=True)
    (folder / one).write_bytes(b"the owner's own file")
    drive = make_drive(sftp_server.spec(sub))
    assert drive.batches.can_batch()
    new_nfc, new_nfd = "n\u00e9w.bin", unicodedata.normalize("NFD", "n\u00e9w.bin")
    names = ["plain.txt", other, new_nfc, new_nfd]  # the last a twin of one in the batch
    datas = [b"plain bytes", b"the twin's new bytes", b"new", b"new twin"]
    files, fds = [], []
    for n, data in zip(names, datas, strict=True):
        fd, sha = _file(tmp_path, n, data)
        fds.append(fd)
        files.append(NewFile(fd, len(data), n, sha))
    journaled: list[list[tuple[int, str]]] = []
    try:
        out = drive.batches.upload_new_batch(files, journal=journaled.append)
    finally:
        for fd in fds:
            os.close(fd)
    assert [type(o) for o in out] == [UploadResult, AlreadyExists, UploadResult, AlreadyExists]
    assert out[1].details == {"path": other, "existing_name": one}  # type: ignore[union-attr]
    assert out[3].details == {"path": new_nfd, "existing_name": new_nfc}  # type: ignore[union-attr]
    assert [i for i, _ in journaled[0]] == [0, 2]  # the twins' files sent nothing
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {
        one: b"the owner's own file",
        "plain.txt": datas[0],
        new_nfc: datas[2],
    }


def test_folders_of_a_batch_are_created_each_with_its_own_outcome(
    tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """`mkdir_many` creates each folder and its parents, an existing one is fine, and a
    folder under a file fails alone, in order."""
    remote = tmp_path / "drive"
    (remote / "there").mkdir(parents=True)
    (remote / "file.txt").write_bytes(b"a file")
    drive = make_drive(str(remote))
    paths = ["a", "a/b/c", "there", "file.txt/sub", "z/[x]{y}"]
    out = drive.batches.mkdir_many(paths)
    assert [type(e).__name__ if e else None for e in out][:3] == [None, None, None]
    assert out[3] is not None and out[4] is None
    for p in ("a/b/c", "there", "z/[x]{y}"):
        assert (remote / p).is_dir()
    assert (remote / "file.txt").read_bytes() == b"a file"
