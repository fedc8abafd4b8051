"""Upload, mkdir and download through `execute()` on a local folder, WebDAV and SFTP,
with the digests the remote reports compared to the ones computed locally."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from tests.support.rig import Rig, make_rig, sha256, temp_names

pytestmark = pytest.mark.usefixtures("store_backend")

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


@pytest.fixture(params=["local", "webdav", "sftp"])
def remote_rig(
    request: pytest.FixtureRequest,
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    local_rig: Callable[..., Rig],
    sub: str,
) -> Rig:
    """A rig over each kind of remote: a local folder, WebDAV, SFTP (on PostgreSQL the local
    folder only: the remote's kind and the store's backend never meet in the executor)."""
    if request.param != "local" and os.environ.get("PLACET_DB", "").startswith("postgresql"):
        pytest.skip("on PostgreSQL the round trip runs on the local folder only")
    if request.param == "local":
        return local_rig()
    served: ServedRemote = request.getfixturevalue(f"{request.param}_server")
    (served.root / sub).mkdir()
    return make_rig(settings, make_drive(served.spec(sub)), tmp_path, served.root / sub)


def test_mkdir_upload_download_round_trip(remote_rig: Rig) -> None:
    assert remote_rig.remote_dir is not None
    data = os.urandom(3 * 1024 * 1024 + 17)
    remote_rig.write("src/report.bin", data)

    mk = remote_rig.run(remote_rig.mkdir("", "docs"))
    assert mk.status == "succeeded"
    assert remote_rig.result(mk).outcome == "done"
    assert (remote_rig.remote_dir / "docs").is_dir()

    up_rec = remote_rig.upload("src/report.bin", "docs")
    up = remote_rig.run(up_rec)
    assert up.status == "succeeded", remote_rig.store.op_results(up.id)
    res = remote_rig.result(up)
    assert res.outcome == "done"
    assert (remote_rig.remote_dir / "docs/report.bin").read_bytes() == data
    assert res.detail["sha256"] == sha256(data)
    assert res.detail["path_taken"] == "temp+move"
    caps = remote_rig.drive.capabilities()
    if caps.hash_types:  # local: sha256, sftp: sha1: the remote's digest = the local one
        assert res.detail["digest_type"] == caps.hash_types[0]
        assert res.detail["digest"] == res.detail["local_digest"] is not None
        assert res.detail["verification"] == f"digest:{caps.hash_types[0]}"
    else:  # webdav reports no digest: the upload was read back and hashed
        assert res.detail["verification"] == "readback:sha256"
        assert res.detail["digest"] is None
    assert temp_names(remote_rig.remote_dir) == []
    # progress: bytes grow to the total, and one event carries the op result
    assert remote_rig.events[-1].op_result is not None
    assert remote_rig.events[-1].bytes_done == remote_rig.events[-1].bytes_total == len(data)

    remote_rig.local("back").mkdir()
    down = remote_rig.run(remote_rig.download("docs/report.bin", "back/report.bin"))
    assert down.status == "succeeded", remote_rig.store.op_results(down.id)
    assert remote_rig.local("back/report.bin").read_bytes() == data
    dres = remote_rig.result(down)
    assert dres.detail["sha256"] == sha256(data)
    if caps.hash_types:
        assert dres.detail["digest"] == res.detail["digest"]

    # a destination folder removed after proposing: the op fails, nothing is created
    remote_rig.local("gone").mkdir()
    rec = remote_rig.download("docs/report.bin", "gone/x.bin")
    remote_rig.local("gone").rmdir()
    failed = remote_rig.run(rec)
    assert failed.status == "failed"
    assert remote_rig.result(failed).detail["code"] == "not_found"
    assert not remote_rig.local("gone").exists()


def test_download_round_trip_and_digest(remote_rig: Rig) -> None:
    assert remote_rig.remote_dir is not None
    data = os.urandom(1024 * 1024 + 5)
    (remote_rig.remote_dir / "in").mkdir()
    (remote_rig.remote_dir / "in/data.bin").write_bytes(data)
    remote_rig.local("dl").mkdir()
    rec = remote_rig.download("in/data.bin", "dl/data.bin")
    final = remote_rig.run(rec)
    assert final.status == "succeeded", remote_rig.store.op_results(final.id)
    res = remote_rig.result(final)
    assert remote_rig.local("dl/data.bin").read_bytes() == data
    assert res.detail["sha256"] == sha256(data)
    if remote_rig.drive.capabilities().hash_types:
        assert res.detail["digest"] == res.detail["remote_digest"] is not None
    else:  # bound to the bytes placet read at proposal time
        assert res.detail["verification"] == "readback:sha256"
        assert res.detail["digest"] == res.detail["remote_digest"] == sha256(data)
    assert temp_names(remote_rig.root.path) == []
    assert final.summary is not None and final.summary["outcomes"] == {"done": 1}


def test_replace_existing_remote_file(remote_rig: Rig) -> None:
    assert remote_rig.remote_dir is not None
    (remote_rig.remote_dir / "notes.txt").write_bytes(b"old notes")
    remote_rig.write("notes.txt", b"new notes, longer")
    rec = remote_rig.upload("notes.txt", "", replace_existing=True)
    final = remote_rig.run(rec)
    assert final.status == "succeeded", remote_rig.store.op_results(final.id)
    assert (remote_rig.remote_dir / "notes.txt").read_bytes() == b"new notes, longer"
    assert temp_names(remote_rig.remote_dir) == []


def test_already_done_when_the_target_holds_the_approved_bytes(remote_rig: Rig) -> None:
    """A crash between the final move and its journal entry leaves the approved bytes
    in place: the next run reports already_done, not stale."""
    assert remote_rig.remote_dir is not None
    data = b"approved content\n" * 1000
    remote_rig.write("a.txt", data)
    rec = remote_rig.upload("a.txt")
    (remote_rig.remote_dir / "a.txt").write_bytes(data)  # as if moved into place, then crashed
    final = remote_rig.run(rec)
    assert final.status == "succeeded"
    res = remote_rig.result(final)
    assert res.outcome == "already_done"
    expected = "readback:sha256" if not remote_rig.drive.capabilities().hash_types else "digest:"
    assert res.detail["verification"].startswith(expected)

    (remote_rig.remote_dir / "b.bin").write_bytes(data)
    remote_rig.local("dl").mkdir()
    drec = remote_rig.download("b.bin", "dl/b.bin")
    remote_rig.write("dl/b.bin", data)  # committed before the crash
    dfinal = remote_rig.run(drec)
    assert dfinal.status == "succeeded"
    assert remote_rig.result(dfinal).outcome == "already_done"


def test_mkdir_already_done_and_file_in_the_way(remote_rig: Rig) -> None:
    assert remote_rig.remote_dir is not None
    rec = remote_rig.mkdir("", "made")
    (remote_rig.remote_dir / "made").mkdir()
    assert remote_rig.run(rec).status == "succeeded"
    assert remote_rig.result(rec).outcome == "already_done"

    rec2 = remote_rig.mkdir("", "blocked")
    (remote_rig.remote_dir / "blocked").write_bytes(b"x")
    final = remote_rig.run(rec2)
    assert final.status == "failed"
    res = remote_rig.result(rec2)
    assert res.outcome == "failed" and res.detail["code"] == "already_exists"
    assert (remote_rig.remote_dir / "blocked").read_bytes() == b"x"
