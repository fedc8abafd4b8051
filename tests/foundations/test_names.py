"""Only names of the exact shape placet generates are treated as its temps: an owner's
file or folder that merely starts with ``.placet-tmp-`` is listed and never deleted
(adversarial finding: cleanup deleted ``.placet-tmp-my-notes.txt`` an hour old)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.drive.rclone import RcloneDrive
from placet.drive.temps import temp_name
from placet.errors import UsageError
from placet.local.atomic import temp_name_for
from placet.names import has_placet_temp, is_placet_temp


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (".placet-tmp-0123456789ab-x.txt", True),
        (".placet-tmp-0123456789abcdef-x.txt", True),
        (".placet-tmp-my-notes.txt", False),
        (".placet-tmp-0123456789AB-x.txt", False),  # placet writes lower-case hex
        (".placet-tmp-0123456789a-x.txt", False),
        (".placet-tmp-0123456789abc-x.txt", False),
        (".placet-tmp-", False),
        ("x.placet-tmp-0123456789ab-", False),
    ],
)
def test_shape(name: str, expected: bool) -> None:
    assert is_placet_temp(name) is expected


def test_generated_names_have_the_shape() -> None:
    for final in ("a.txt", "é" * 200, "x"):
        assert is_placet_temp(temp_name(final))
        assert is_placet_temp(temp_name_for(final))
    assert has_placet_temp("a/b/" + temp_name("c"))
    assert not has_placet_temp("a/.placet-tmp-notes/c")


def test_owner_names_with_the_prefix_are_listed_and_never_cleaned(
    local_drive: RcloneDrive,
) -> None:
    root = Path(local_drive.spec)
    (root / "f").mkdir()
    mine = root / "f" / ".placet-tmp-my-notes.txt"
    mine.write_bytes(b"the owner's notes")
    folder = root / "f" / ".placet-tmp-archive"
    folder.mkdir()
    (folder / "kept.txt").write_bytes(b"k")
    stale = root / "f" / (temp_name("real.txt"))
    stale.write_bytes(b"partial")
    old = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    for p in (mine, stale, folder / "kept.txt"):
        os.utime(p, (old, old))

    names = sorted(e.name for e in local_drive.list_folder("f")[0])
    assert names == [".placet-tmp-archive", ".placet-tmp-my-notes.txt"]
    tree = [e.path for e in local_drive.list_tree("")]
    assert "f/.placet-tmp-archive/kept.txt" in tree and f"f/{stale.name}" not in tree

    assert local_drive.cleanup_temps("f") == [f"f/{stale.name}"]
    assert mine.read_bytes() == b"the owner's notes"
    assert (folder / "kept.txt").exists() and not stale.exists()
    with pytest.raises(UsageError, match="not a placet temp"):
        local_drive.remove_temp("f/.placet-tmp-my-notes.txt")
    assert mine.exists()
