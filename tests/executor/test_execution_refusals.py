"""Execution-time refusals: a root whose parent was swapped for a symlink, hard links,
FIFOs and symlinks in place of a proposed file, a tampered request, another drive."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.errors import PolicyRefused, WrongState
from placet.executor import ProgressEvent, execute
from placet.paths.roots import Root
from tests.support.rig import Rig, alter_request, make_rig


def _failed(rig: Rig, rec_id: int) -> dict[str, object]:
    assert rig.store.get(rec_id).status == "failed"
    [res] = rig.store.op_results(rec_id)
    assert res.outcome == "failed", res.detail
    return res.detail


def test_root_parent_swapped_for_symlink_reads_nothing_outside(rig: Rig, tmp_path: Path) -> None:
    """/work/proj is the root; after proposing, /work is renamed away and replaced by a
    symlink to a folder holding its own proj/ with a secret under the same name."""
    assert rig.remote_dir is not None
    rig.write("notes.txt", b"public notes")
    rec = rig.upload("notes.txt")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    (elsewhere / "proj/notes.txt").write_bytes(b"SECRET outside the root")
    work = rig.root.path.parent
    work.rename(tmp_path / "work.moved")
    work.symlink_to(elsewhere)
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "root_changed"
    assert os.listdir(rig.remote_dir) == []


def test_root_parent_swapped_download_writes_nothing_outside(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    (rig.remote_dir / "payload.sh").write_bytes(b"echo pwned")
    rec = rig.download("payload.sh", "payload.sh")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    work = rig.root.path.parent
    work.rename(tmp_path / "work.moved")
    work.symlink_to(elsewhere)
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "root_changed"
    assert os.listdir(elsewhere / "proj") == []


def test_folder_inside_root_swapped_for_symlink(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    rig.write("sub/f.txt", b"inside")
    rec = rig.upload("sub/f.txt")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"SECRET")
    rig.local("sub/f.txt").unlink()
    rig.local("sub").rmdir()
    rig.local("sub").symlink_to(outside)
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "symlink_refused"
    assert os.listdir(rig.remote_dir) == []


def test_hard_linked_file_is_refused_at_execution(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    p = rig.write("h.txt", b"data")
    rec = rig.upload("h.txt")
    os.link(p, tmp_path / "second-link")
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "hard_link_refused"
    assert os.listdir(rig.remote_dir) == []


def test_fifo_in_place_of_the_file_is_refused_without_blocking(rig: Rig) -> None:
    assert rig.remote_dir is not None
    p = rig.write("pipe.txt", b"data")
    rec = rig.upload("pipe.txt")
    p.unlink()
    os.mkfifo(p)
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "not_regular_file"
    assert os.listdir(rig.remote_dir) == []


def test_symlink_in_place_of_the_file_is_refused(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    p = rig.write("l.txt", b"data")
    rec = rig.upload("l.txt")
    (tmp_path / "secret").write_bytes(b"SECRET")
    p.unlink()
    p.symlink_to(tmp_path / "secret")
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "symlink_refused"
    assert os.listdir(rig.remote_dir) == []


def test_root_replaced_by_another_folder_is_refused(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    rig.write("a.txt", b"a")
    rec = rig.upload("a.txt")
    rig.root.path.rename(tmp_path / "proj.old")
    rig.root.path.mkdir()
    (rig.root.path / "a.txt").write_bytes(b"a")
    detail = _failed(rig, rig.run(rec).id)
    assert detail["code"] == "root_changed"


def test_tampered_request_is_refused_and_nothing_runs(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("ok.txt", b"fine")
    rec = rig.upload("ok.txt")
    rig.accept(rec)
    evil = dict(rec.request, name="evil.txt")
    alter_request(rig.settings.db_path, rec.id, json.dumps(evil))
    with pytest.raises(PolicyRefused) as e:
        execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert e.value.error_code == "request_altered"
    final = rig.store.get(rec.id)
    assert final.status == "failed"
    assert final.summary is not None and final.summary["error"]["code"] == "request_altered"
    assert os.listdir(rig.remote_dir) == []


def test_drive_changed_since_proposal_is_refused(
    rig: Rig, tmp_path: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    assert rig.remote_dir is not None
    rig.write("ok.txt", b"fine")
    rec = rig.upload("ok.txt")
    rig.accept(rec)
    other = tmp_path / "other-drive"
    other.mkdir()
    moved = rig.settings.model_copy(update={"drive": str(other)})
    with pytest.raises(PolicyRefused) as e:
        execute(rig.store, moved, rec.id, drive=make_drive(str(other)))
    assert e.value.error_code == "drive_changed"
    assert rig.store.get(rec.id).status == "failed"
    assert os.listdir(rig.remote_dir) == [] and os.listdir(other) == []


def test_only_approved_proposals_execute(rig: Rig) -> None:
    rig.write("p.txt", b"p")
    rec = rig.upload("p.txt")
    with pytest.raises(WrongState):
        execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert rig.store.get(rec.id).status == "pending"


def test_two_executors_race_one_claims(rig: Rig) -> None:
    rig.write("r.txt", b"race")
    rec = rig.upload("r.txt")
    rig.accept(rec)
    errors: list[BaseException] = []
    done: list[str] = []

    def go() -> None:
        try:
            done.append(execute(rig.store, rig.settings, rec.id, drive=rig.drive).status)
        except WrongState as e:
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done == ["succeeded"] and len(errors) == 1


# --- containment to the end of a download; placet's own folders ---------------------------


@pytest.mark.parametrize("how", ["moved_out", "swapped_inside"])
@pytest.mark.timeout(120)
def test_folder_moved_mid_download_receives_nothing(rig: Rig, tmp_path: Path, how: str) -> None:
    """The destination folder is renamed out of the root (or swapped for another folder of
    the same name) from the progress callback, while the bytes stream: the file must not
    land in the moved folder, and no temporary file is left there."""
    assert rig.remote_dir is not None
    data = os.urandom(8 * 1024 * 1024)
    (rig.remote_dir / "big.bin").write_bytes(data)
    rig.write("sub/keep.txt", b"k")
    rec = rig.download("big.bin", "sub/big.bin")
    outside = tmp_path / "outside"
    outside.mkdir()
    moved_to = outside / "sub" if how == "moved_out" else rig.root.path / "sub-old"
    moved: list[int] = []

    def progress(ev: ProgressEvent) -> None:
        if not moved and ev.op_result is None:
            (rig.root.path / "sub").rename(moved_to)
            if how == "swapped_inside":
                (rig.root.path / "sub").mkdir()
            moved.append(ev.bytes_done)

    rig.accept(rec)
    final = execute(rig.store, rig.settings, rec.id, drive=rig.drive, progress=progress)
    assert moved, "the progress callback never ran during the transfer"
    detail = _failed(rig, final.id)
    assert detail["code"] == "destination_moved", detail
    assert "moved or replaced during the transfer" in str(detail["message"])
    assert sorted(os.listdir(moved_to)) == ["keep.txt"]  # no file, no temp
    if how == "swapped_inside":
        assert os.listdir(rig.root.path / "sub") == []


def _root_at(rig: Rig, path: Path, name: str) -> Rig:
    """`rig` with a root at `path`, built as a root from an older placet (or another
    PLACET_HOME) would be: without today's refusal of placet's folders."""
    st = os.stat(path)
    return dataclasses.replace(rig, root=Root(name, path, st.st_dev, st.st_ino))


@pytest.mark.parametrize("where", ["data_dir_itself", "containing_data_dir"])
def test_download_into_placet_folders_is_refused_at_execution(
    rig: Rig, tmp_path: Path, where: str
) -> None:
    """Defence in depth: even with a root that holds placet's data/config folder (made
    before the root rule, or under another PLACET_HOME), a download that would create
    config.toml (allow_yes = true) there writes nothing."""
    assert rig.remote_dir is not None
    (rig.remote_dir / "config.toml").write_bytes(b"allow_yes = true\n")
    home = rig.settings.data_dir
    assert rig.settings.config_file.parent == home and not rig.settings.config_file.exists()
    if where == "data_dir_itself":
        evil, target = _root_at(rig, home, "home"), "config.toml"
    else:
        evil, target = _root_at(rig, home.parent, "top"), f"{home.name}/config.toml"
    rec = evil.download("config.toml", target)
    detail = _failed(evil, evil.run(rec).id)
    assert detail["code"] == "placet_own_path", detail
    assert str(home) in str(detail["message"])
    assert not rig.settings.config_file.exists()
    assert [n for n in os.listdir(home) if n.startswith(".placet-tmp-")] == []


@pytest.mark.parametrize("kind", ["upload", "mkdir"])
def test_store_approved_write_into_placet_folders_is_refused_at_execution(
    settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive], kind: str
) -> None:
    """Defence in depth: a local-folder drive holds placet's data dir, and a proposal to
    write config.toml (allow_yes = true) there is approved directly in the store, past
    `placet accept` and the review UI. The executor refuses it before any op runs
    (`placet_own_path`), ends it failed and writes nothing into the data dir."""
    home = settings.data_dir
    assert home.parent == tmp_path
    up = make_rig(settings, make_drive(str(tmp_path)), tmp_path / "up", tmp_path)
    if kind == "upload":
        up.write("cfg.toml", b"allow_yes = true\n")
        rec = up.upload("cfg.toml", home.name, name="config.toml", replace_existing=True)
    else:
        rec = up.mkdir(home.name, "hooks")
    up.accept(rec)  # straight into the store: no vetting on the way
    with pytest.raises(PolicyRefused) as exc:
        execute(up.store, up.settings, rec.id, drive=up.drive, progress=up.events.append)
    assert exc.value.error_code == "placet_own_path"
    assert "refusing to execute" in exc.value.message and str(home) in exc.value.message
    assert exc.value.details == {"proposal_id": rec.id, "op_index": 0}
    end = up.store.get(rec.id)
    assert end.status == "failed"
    assert end.summary is not None and end.summary["error"]["code"] == "placet_own_path"
    assert up.store.op_results(rec.id) == [] and up.events == []
    assert not settings.config_file.exists() and not (home / "hooks").exists()
    assert [n for n in os.listdir(home) if n.startswith(".placet-tmp-")] == []
