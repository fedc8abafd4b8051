"""The plan entry cap counts files: a tree of N files in many folders fits a cap of N;
folders have a cap of the same size of their own (docs/decisions/0024-sync-plans.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placet.errors import LimitExceeded
from placet.sync import LocalTree, MemoryDigestCache, index_local, plan
from tests.support.listings import SHA1, L, R


def _tree(root: Path, folders: int, per: int) -> None:
    for d in range(folders):
        sub = root / f"d{d}"
        sub.mkdir()
        for f in range(per):
            (sub / f"f{f}").write_text(f"{d}/{f}")


def _index(root: Path, cap: int) -> int:
    tree = LocalTree(
        root, "", digest_types=["sha1"], cache=MemoryDigestCache(), root_key="k", entry_cap=cap
    )
    res = index_local(tree)
    return len(res.entries)


def test_index_cap_counts_files_not_folders(tmp_path: Path) -> None:
    _tree(tmp_path, folders=4, per=5)  # 20 files, 4 folders
    assert _index(tmp_path, cap=20) == 24
    with pytest.raises(LimitExceeded) as e:
        _index(tmp_path, cap=19)
    assert e.value.details["counted"] == "files"


def test_index_cap_bounds_folders_too(tmp_path: Path) -> None:
    for d in range(6):
        (tmp_path / f"empty{d}").mkdir()
    with pytest.raises(LimitExceeded) as e:
        _index(tmp_path, cap=5)
    assert e.value.details["counted"] == "folders"


def test_plan_cap_counts_files_per_side() -> None:
    local = [L(f"d{d}", kind="dir") for d in range(3)] + [
        L(f"d{d}/f{f}", f"{d}{f}") for d in range(3) for f in range(4)
    ]
    remote = [R(f"d{d}", kind="dir") for d in range(3)] + [
        R(f"d{d}/f{f}", f"{d}{f}") for d in range(3) for f in range(4)
    ]
    p = plan(local, remote, {}, SHA1, entry_cap=12)  # 12 files + 3 folders each side
    assert p.summary["skip"] == 15
    with pytest.raises(LimitExceeded) as e:
        plan(local, remote, {}, SHA1, entry_cap=11)
    assert e.value.details == {"side": "local", "cap": 11, "counted": "files"}
    with pytest.raises(LimitExceeded) as e:
        plan(local, remote, {}, SHA1, entry_cap=2)
    assert e.value.details["counted"] == "folders"
