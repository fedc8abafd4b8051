"""ASCII names that have a normalization twin (`placet.drive.twins.twin_free`): ``K``,
``;`` and a backquote are the NFC forms of KELVIN SIGN, GREEK QUESTION MARK and GREEK
VARIA, so ``K.txt`` beside ``\\u212a.txt`` is refused as ``café`` NFC beside NFD is.
Real rclone, `rclone serve sftp` of a local folder that the test reads directly."""

from __future__ import annotations

import hashlib
import os
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive, UploadResult
from placet.drive.batches import NewFile
from placet.drive.twins import twin_free
from placet.errors import AlreadyExists

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

KELVIN = "\u212a.txt"
"""``K.txt`` with KELVIN SIGN for its ``K``: NFC (and NFD) ``K.txt``."""


def test_twin_free_names_are_exactly_those_no_other_name_normalizes_to() -> None:
    """Every code point whose NFC form is ASCII is that ASCII character itself or one of
    the three `twin_free` rules out (as of this Python's Unicode database)."""
    images = {
        unicodedata.normalize("NFC", chr(c))
        for c in range(0x80, sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and unicodedata.normalize("NFC", chr(c)).isascii()
    }
    assert images == {"K", ";", "`"}
    assert [twin_free(n) for n in ("plain.txt", "K.txt", "a;b", "`q`", "caf\u00e9")] == [
        True,
        False,
        False,
        False,
        False,
    ]


def _batch(
    tmp_path: Path, drive: RcloneDrive, names: list[str], ready: Callable[[int], None] | None
) -> tuple[list[object], list[bytes]]:
    files, fds, datas = [], [], []
    for i, name in enumerate(names):
        data = f"approved {i}".encode()
        p = tmp_path / "src" / f"f{i}"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data)
        fds.append(os.open(p, os.O_RDONLY))
        datas.append(data)
        files.append(NewFile(fds[-1], len(data), f"box/{name}", hashlib.sha256(data).hexdigest()))
    try:
        return list(drive.batches.upload_new_batch(files, ready=ready)), datas
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.parametrize("when", ["before the batch", "during the upload"])
def test_a_batch_refuses_an_ascii_name_beside_its_twin(
    sftp_server: ServedRemote,
    make_drive: Callable[..., RcloneDrive],
    tmp_path: Path,
    sub: str,
    when: str,
) -> None:
    """rclone serve sftp moved a batch's ``K.txt`` onto the owner's ``\\u212a.txt``,
    which was gone after the batch: a twin that is there before the batch or appears
    while it uploads is `AlreadyExists` (``existing_name``), and stays as it was."""
    box = sftp_server.root / sub / "box"
    box.mkdir(parents=True)
    twin = box / KELVIN
    if when == "before the batch":
        twin.write_bytes(b"the owner's own file")

    def ready(i: int) -> None:
        if i == 1 and not twin.exists():
            twin.write_bytes(b"the owner's own file")

    drive = make_drive(sftp_server.spec(sub))
    out, datas = _batch(tmp_path, drive, ["plain.txt", "K.txt"], ready)
    assert isinstance(out[0], UploadResult)
    assert isinstance(out[1], AlreadyExists), out[1]
    assert out[1].details == {"path": "box/K.txt", "existing_name": KELVIN}
    assert {p.name: p.read_bytes() for p in box.iterdir()} == {
        "plain.txt": datas[0],
        KELVIN: b"the owner's own file",
    }


def test_mkdir_refuses_an_ascii_name_beside_its_twin(
    sftp_server: ServedRemote, make_drive: Callable[..., RcloneDrive], sub: str
) -> None:
    """mkdir of ``K`` beside the owner's folder ``\\u212a`` is refused and creates
    nothing (rclone serve sftp would answer success and create nothing)."""
    box = sftp_server.root / sub / "box"
    (box / "\u212a").mkdir(parents=True)
    drive = make_drive(sftp_server.spec(sub))
    with pytest.raises(AlreadyExists) as ei:
        drive.mkdir("box/K")
    assert ei.value.details == {"path": "box/K", "existing_name": "\u212a"}
    assert [p.name for p in box.iterdir()] == ["\u212a"]
