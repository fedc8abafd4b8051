"""Upload, mkdir and download through `execute()` on a local folder, WebDAV and SFTP,
with the digests the remote reports compared to the ones computed locally."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from executor_fixtures import Rig, make_rig, sha256, temp_names

from placet.config import Settings
from placet.drive import RcloneDrive

pytestmark = pytest.mark.usefixtures("store_backend")

if TYPE_CHECKING:
    from drive_fixtures import ServedRemote

pytest_plugins = ["drive_fixtures"]


@pytest.fixture(params=["local", "webdav", "sftp"])
def rig(
    request: pytest.FixtureRequest,
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    sub: str,
) -> Rig:
    if request.param == "local":
        remote = tmp_path / "drive"
        remote.mkdir()
        return make_rig(settings, make_drive(str(remote)), tmp_path, remote)
    served: ServedRemote = request.getfixturevalue(f"{request.param}_server")
    (served.root / sub).mkdir()
    return make_rig(settings, make_drive(served.spec(sub)), tmp_path, served.root / sub)


def test_mkdir_upload_download_round_trip(rig: Rig) -> None:
    assert rig.remote_dir is not None
    data = os.urandom(3 * 1024 * 1024 + 17)
    rig.write("src/report.bin", data)

    mk = rig.run(rig.mkdir("", "docs"))
    assert mk.status == "succeeded"
    assert rig.result(mk).outcome == "done"
    assert (rig.remote_dir / "docs").is_dir()

    up_rec = rig.upload("src/report.bin", "docs")
    up = rig.run(up_rec)
    assert up.status == "succeeded", rig.store.op_results(up.id)
    res = rig.result(up)
    assert res.outcome == "done"
    assert (rig.remote_dir / "docs/report.bin").read_bytes() == data
    assert res.detail["sha256"] == sha256(data)
    assert res.detail["path_taken"] == "temp+move"
    caps = rig.drive.capabilities()
    if caps.hash_types:  # local: sha256, sftp: sha1: the remote's digest = the local one
        assert res.detail["digest_type"] == caps.hash_types[0]
        assert res.detail["digest"] == res.detail["local_digest"] is not None
        assert res.detail["verification"] == f"digest:{caps.hash_types[0]}"
    else:  # webdav reports no digest: the upload was read back and hashed
        assert res.detail["verification"] == "readback:sha256"
        assert res.detail["digest"] is None
    assert temp_names(rig.remote_dir) == []
    # progress: bytes grow to the total, and one event carries the op result
    assert rig.events[-1].op_result is not None
    assert rig.events[-1].bytes_done == rig.events[-1].bytes_total == len(data)

    rig.local("back").mkdir()
    down = rig.run(rig.download("docs/report.bin", "back/report.bin"))
    assert down.status == "succeeded", rig.store.op_results(down.id)
    assert rig.local("back/report.bin").read_bytes() == data
    dres = rig.result(down)
    assert dres.detail["sha256"] == sha256(data)
    if caps.hash_types:
        assert dres.detail["digest"] == res.detail["digest"]

    # a destination folder removed after proposing: the op fails, nothing is created
    rig.local("gone").mkdir()
    rec = rig.download("docs/report.bin", "gone/x.bin")
    rig.local("gone").rmdir()
    failed = rig.run(rec)
    assert failed.status == "failed"
    assert rig.result(failed).detail["code"] == "not_found"
    assert not rig.local("gone").exists()


def test_download_round_trip_and_digest(rig: Rig) -> None:
    assert rig.remote_dir is not None
    data = os.urandom(1024 * 1024 + 5)
    (rig.remote_dir / "in").mkdir()
    (rig.remote_dir / "in/data.bin").write_bytes(data)
    rig.local("dl").mkdir()
    rec = rig.download("in/data.bin", "dl/data.bin")
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(final.id)
    res = rig.result(final)
    assert rig.local("dl/data.bin").read_bytes() == data
    assert res.detail["sha256"] == sha256(data)
    if rig.drive.capabilities().hash_types:
        assert res.detail["digest"] == res.detail["remote_digest"] is not None
    else:
        assert res.detail["verification"] == "size"
    assert temp_names(rig.root.path) == []
    assert final.summary is not None and final.summary["outcomes"] == {"done": 1}


def test_replace_existing_remote_file(rig: Rig) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "notes.txt").write_bytes(b"old notes")
    rig.write("notes.txt", b"new notes, longer")
    rec = rig.upload("notes.txt", "", replace_existing=True)
    final = rig.run(rec)
    assert final.status == "succeeded", rig.store.op_results(final.id)
    assert (rig.remote_dir / "notes.txt").read_bytes() == b"new notes, longer"
    assert temp_names(rig.remote_dir) == []


def test_already_done_when_the_target_holds_the_approved_bytes(rig: Rig) -> None:
    """A crash between the final move and its journal entry leaves the approved bytes
    in place: the next run reports already_done, not stale."""
    assert rig.remote_dir is not None
    data = b"approved content\n" * 1000
    rig.write("a.txt", data)
    rec = rig.upload("a.txt")
    (rig.remote_dir / "a.txt").write_bytes(data)  # as if moved into place, then crashed
    final = rig.run(rec)
    assert final.status == "succeeded"
    res = rig.result(final)
    assert res.outcome == "already_done"
    expected = "readback:sha256" if not rig.drive.capabilities().hash_types else "digest:"
    assert res.detail["verification"].startswith(expected)

    (rig.remote_dir / "b.bin").write_bytes(data)
    rig.local("dl").mkdir()
    drec = rig.download("b.bin", "dl/b.bin")
    rig.write("dl/b.bin", data)  # committed before the crash
    dfinal = rig.run(drec)
    assert dfinal.status == "succeeded"
    assert rig.result(dfinal).outcome == "already_done"


def test_mkdir_already_done_and_file_in_the_way(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rec = rig.mkdir("", "made")
    (rig.remote_dir / "made").mkdir()
    assert rig.run(rec).status == "succeeded"
    assert rig.result(rec).outcome == "already_done"

    rec2 = rig.mkdir("", "blocked")
    (rig.remote_dir / "blocked").write_bytes(b"x")
    final = rig.run(rec2)
    assert final.status == "failed"
    res = rig.result(rec2)
    assert res.outcome == "failed" and res.detail["code"] == "already_exists"
    assert (rig.remote_dir / "blocked").read_bytes() == b"x"
