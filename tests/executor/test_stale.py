"""Evidence re-checked at execution: stale sources and targets change nothing, downloads
never overwrite unless the proposal asked and the root's policy allows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import RootPolicy
from placet.errors import AlreadyExists, PolicyRefused
from tests.support.rig import Rig, temp_names

pytestmark = pytest.mark.usefixtures("store_backend")

if TYPE_CHECKING:
    pass


def _stale(rig: Rig, rec_id: int) -> dict[str, object]:
    final = rig.store.get(rec_id)
    assert final.status == "failed"
    [res] = rig.store.op_results(rec_id)
    assert res.outcome == "stale", res.detail
    assert res.detail["code"] == "stale" and res.detail["retryable"] is False
    details = res.detail["details"]
    assert isinstance(details, dict)
    return details


def test_local_file_edited_after_proposing_is_stale_and_remote_untouched(rig: Rig) -> None:
    assert rig.remote_dir is not None
    p = rig.write("draft.txt", b"version one")
    rec = rig.upload("draft.txt")
    p.write_bytes(b"version two!")
    rig.run(rec)
    d = _stale(rig, rec.id)
    assert d["side"] == "local"
    assert d["expected"]["size"] == 11 and d["found"]["size"] == 12  # type: ignore[index]
    assert os.listdir(rig.remote_dir) == []


def test_same_size_edit_with_mtime_kept_is_caught_by_the_streamed_hash(rig: Rig) -> None:
    """Size and mtime put back as they were: the bytes still differ from the approved
    SHA-256, so the drive refuses them and nothing appears under the target name."""
    assert rig.remote_dir is not None
    p = rig.write("same.txt", b"AAAA")
    st = p.stat()
    rec = rig.upload("same.txt")
    p.write_bytes(b"BBBB")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    rig.run(rec)
    _stale(rig, rec.id)
    assert os.listdir(rig.remote_dir) == []


def test_remote_target_that_appeared_is_stale_and_unchanged(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("new.txt", b"mine")
    rec = rig.upload("new.txt")
    (rig.remote_dir / "new.txt").write_bytes(b"someone else's")
    rig.run(rec)
    d = _stale(rig, rec.id)
    assert d["side"] == "remote" and d["found"]["exists"] is True  # type: ignore[index]
    assert (rig.remote_dir / "new.txt").read_bytes() == b"someone else's"
    assert temp_names(rig.remote_dir) == []


def test_replaced_target_changed_since_proposal_is_stale(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "t.txt").write_bytes(b"seen by the owner")
    rig.write("t.txt", b"replacement")
    rec = rig.upload("t.txt", replace_existing=True)
    (rig.remote_dir / "t.txt").write_bytes(b"edited on the drive")
    rig.run(rec)
    d = _stale(rig, rec.id)
    assert d["side"] == "remote"
    assert (rig.remote_dir / "t.txt").read_bytes() == b"edited on the drive"


def test_webdav_replacement_compares_size_and_mtime(webdav_rig: Rig) -> None:
    rig = webdav_rig
    assert rig.remote_dir is not None
    target = rig.remote_dir / "w.txt"
    target.write_bytes(b"1234")
    rig.write("w.txt", b"new")
    rec = rig.upload("w.txt", replace_existing=True)
    target.write_bytes(b"5678")  # same size, no digest on webdav: the mtime tells
    os.utime(target, (target.stat().st_atime + 5, target.stat().st_mtime + 5))
    rig.run(rec)
    _stale(rig, rec.id)
    assert target.read_bytes() == b"5678"


def test_remote_source_changed_before_download_is_stale(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "s.bin").write_bytes(b"first")
    rig.local("in").mkdir()
    rec = rig.download("s.bin", "in/s.bin")
    (rig.remote_dir / "s.bin").write_bytes(b"second")
    rig.run(rec)
    d = _stale(rig, rec.id)
    assert d["side"] == "remote"
    assert os.listdir(rig.local("in")) == []


def test_download_onto_existing_file_without_overwrite(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "r.txt").write_bytes(b"remote")
    rig.write("dst/r.txt", b"local, precious")
    with pytest.raises(AlreadyExists):  # refused at proposal time
        rig.download("r.txt", "dst/r.txt")
    rig.local("dst/r.txt").unlink()
    rec = rig.download("r.txt", "dst/r.txt")
    rig.write("dst/r.txt", b"local, precious")  # appears after proposing
    final = rig.run(rec)
    assert final.status == "failed"
    [res] = rig.store.op_results(rec.id)
    assert res.outcome == "failed" and res.detail["code"] == "already_exists"
    assert rig.local("dst/r.txt").read_bytes() == b"local, precious"
    assert temp_names(rig.root.path) == []


def test_download_overwrite_needs_policy_and_keeps_old_file_in_trash(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "cfg.txt").write_bytes(b"remote version")
    rig.write("cfg.txt", b"local version")
    with pytest.raises(PolicyRefused):  # overwrite asked, policy new-only
        rig.download("cfg.txt", "cfg.txt", overwrite=True)
    rig.settings = rig.settings.model_copy(
        update={"roots": {str(rig.root.path): RootPolicy(downloads="allow-overwrite")}}
    )
    before = rig.local("cfg.txt").stat().st_ino
    rec = rig.download("cfg.txt", "cfg.txt", overwrite=True)
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(rec.id)
    assert rig.local("cfg.txt").read_bytes() == b"remote version"
    assert rig.local("cfg.txt").stat().st_ino != before  # renamed into place, not rewritten
    [res] = rig.store.op_results(rec.id)
    assert res.detail["replaced"] is True
    trashed = Path(str(res.detail["trash_path"]))
    assert trashed.parent == rig.settings.trash_dir
    assert trashed.read_bytes() == b"local version"


def test_overwrite_refused_when_policy_was_withdrawn_before_accepting(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "x.txt").write_bytes(b"remote")
    rig.write("x.txt", b"local")
    allow = {str(rig.root.path): RootPolicy(downloads="allow-overwrite")}
    rig.settings = rig.settings.model_copy(update={"roots": allow})
    rec = rig.download("x.txt", "x.txt", overwrite=True)
    rig.settings = rig.settings.model_copy(update={"roots": {}})
    final = rig.run(rec)
    assert final.status == "failed"
    [res] = rig.store.op_results(rec.id)
    assert res.detail["code"] == "refused"
    assert rig.local("x.txt").read_bytes() == b"local"


def test_overwrite_target_edited_after_proposing_is_stale(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "y.txt").write_bytes(b"remote")
    rig.write("y.txt", b"local")
    allow = {str(rig.root.path): RootPolicy(downloads="allow-overwrite")}
    rig.settings = rig.settings.model_copy(update={"roots": allow})
    rec = rig.download("y.txt", "y.txt", overwrite=True)
    rig.write("y.txt", b"local, edited")
    rig.run(rec)
    d = _stale(rig, rec.id)
    assert d["side"] == "local"
    assert rig.local("y.txt").read_bytes() == b"local, edited"
