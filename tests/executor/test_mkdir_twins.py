"""A mkdir proposal beside a folder whose name differs only by Unicode normalization,
executed on `rclone serve sftp` (which resolves one name to the other on some calls)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from tests.support.rig import make_rig

pytestmark = pytest.mark.usefixtures("store_backend")

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


@pytest.mark.parametrize("first_form", ["NFC", "NFD"])
def test_a_mkdir_beside_its_normalization_twin_fails_and_leaves_the_twin(
    sftp_server: ServedRemote,
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    sub: str,
    first_form: str,
) -> None:
    """The op fails (already_exists, naming the twin), never ``already_done`` on the
    owner's folder taken for the new one, and the folder holds only the twin."""
    name = "caf\u00e9"
    one = unicodedata.normalize(first_form, name)
    other = unicodedata.normalize("NFD" if first_form == "NFC" else "NFC", name)
    folder = sftp_server.root / sub
    (folder / one).mkdir(parents=True)
    rig = make_rig(settings, make_drive(sftp_server.spec(sub)), tmp_path, folder)
    final = rig.run(rig.mkdir("", other))
    assert final.status == "failed"
    res = rig.result(final)
    assert res.outcome == "failed"
    assert res.detail["code"] == "already_exists"
    assert res.detail["details"] == {"path": other, "existing_name": one}
    assert [p.name for p in folder.iterdir()] == [one]
