"""mkdir beside a name that differs only by Unicode normalization (`placet.drive.twins`):
real rclone, `rclone serve sftp` of a local folder that the test reads directly."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from placet.drive import RcloneDrive
from placet.errors import AlreadyExists

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


@pytest.mark.parametrize("twin_kind", ["folder", "file"])
@pytest.mark.parametrize("first_form", ["NFC", "NFD"])
def test_mkdir_beside_a_normalization_twin_is_refused(
    sftp_server: ServedRemote,
    make_drive: Callable[..., RcloneDrive],
    sub: str,
    first_form: str,
    twin_kind: str,
) -> None:
    """rclone serve sftp resolves ``café`` NFD to ``café`` NFC on some calls and not on
    others: mkdir of a folder beside its folder twin answered success and created
    nothing (what later landed "in" the new folder landed in the owner's), beside a file
    twin it was refused without naming the twin. mkdir refuses (`AlreadyExists`,
    ``existing_name``) and creates nothing; the folder's own name, ASCII names and a
    deeper path are created as before."""
    name = "caf\u00e9"
    one = unicodedata.normalize(first_form, name)
    other = unicodedata.normalize("NFD" if first_form == "NFC" else "NFC", name)
    root = sftp_server.root / sub
    (root / "box").mkdir(parents=True)
    if twin_kind == "folder":
        (root / "box" / one).mkdir()
    else:
        (root / "box" / one).write_bytes(b"the owner's own file")
    drive = make_drive(sftp_server.spec(sub))
    with pytest.raises(AlreadyExists) as ei:
        drive.mkdir(f"box/{other}")
    assert ei.value.details == {"path": f"box/{other}", "existing_name": one}
    assert sorted(p.name for p in (root / "box").iterdir()) == [one]
    if twin_kind == "folder":
        drive.mkdir(f"box/{one}")  # the existing folder itself is fine
        drive.mkdir(f"box/{one}/inner")
        assert (root / "box" / one / "inner").is_dir()
    drive.mkdir("box/plain")
    assert sorted(p.name for p in (root / "box").iterdir()) == sorted([one, "plain"])
