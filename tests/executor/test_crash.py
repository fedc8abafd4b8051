"""kill -9 of the accepting process mid-transfer: nothing appears under the target name,
recovery marks the proposal interrupted at once (the holder is dead on this host), and
accepting again completes with the approved digest and leaves no temporary names.

The process is `placet accept ID --yes` (allow_yes = true in config.toml), killed as soon
as its temporary object (upload) or temporary file (download) holds a few MiB; rclone's
children die with it (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from placet.names import BACKUP_PREFIX
from tests.support.rig import Rig, placet_cli, sha256, start_accept_yes

pytestmark = pytest.mark.usefixtures("store_backend")

SIZE = 200 * 1024 * 1024


def _big(path: Path) -> bytes:
    block = os.urandom(1024 * 1024)
    data = b"".join(block[i:] + block[:i] for i in range(SIZE // len(block)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def _temps(folder: Path) -> list[Path]:
    return [folder / n for n in os.listdir(folder) if n.startswith(".placet-tmp-")]


def _kill_mid_transfer(pid: int, folder: Path) -> Path:
    """Start `placet accept ID --yes`; kill -9 it once a temp in `folder` has 4 MiB."""
    proc = start_accept_yes(pid)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for t in _temps(folder):
                try:
                    if t.stat().st_size >= 4 * 1024 * 1024:
                        os.kill(proc.pid, signal.SIGKILL)
                        proc.wait()
                        return t
                except FileNotFoundError:
                    continue
            if proc.poll() is not None:
                pytest.fail(f"placet accept ended before the kill: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.002)
        pytest.fail("no temporary name appeared")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise AssertionError("unreachable")


def _no_rclone_child_left(root: Path) -> bool:
    """No rclone process still has `root` (the remote folder) in its arguments."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        if not [ln for ln in ps.splitlines() if "rclone" in ln and str(root) in ln]:
            return True
        time.sleep(0.1)
    return False


def _recover_and_finish(rig: Rig, rec_id: int) -> None:
    swept = rig.store.sweep()
    assert swept.interrupted == [rec_id]  # holder pid is dead here: recovered at once
    rec = rig.store.get(rec_id)
    assert rec.status == "interrupted"
    [journal] = rig.store.op_results(rec_id)
    assert journal.outcome == "failed" and journal.detail["code"] == "in_progress"
    assert journal.detail["temps"]
    r = placet_cli("accept", str(rec_id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    final = rig.store.get(rec_id)
    assert final.status == "succeeded" and final.attempt == 2
    assert final.summary is not None and final.summary["temps_removed"]


@pytest.mark.timeout(300)
def test_kill_during_upload_then_accept_again(yes_rig: Rig) -> None:
    assert yes_rig.remote_dir is not None
    data = _big(yes_rig.local("big.bin"))
    rec = yes_rig.upload("big.bin")
    temp = _kill_mid_transfer(rec.id, yes_rig.remote_dir)
    assert not (yes_rig.remote_dir / "big.bin").exists()
    assert _no_rclone_child_left(yes_rig.remote_dir)
    assert temp.exists() and temp.stat().st_size < SIZE  # a partial temp, under a temp name
    _recover_and_finish(yes_rig, rec.id)
    assert sha256((yes_rig.remote_dir / "big.bin").read_bytes()) == sha256(data)
    [res] = yes_rig.store.op_results(rec.id)
    assert res.outcome == "done" and res.detail["digest"] == rec.evidence["local"]["digest"]
    assert _temps(yes_rig.remote_dir) == []


@pytest.mark.timeout(300)
def test_kill_during_download_then_accept_again(yes_rig: Rig) -> None:
    assert yes_rig.remote_dir is not None
    data = _big(yes_rig.remote_dir / "big.bin")
    yes_rig.local("in").mkdir()
    rec = yes_rig.download("big.bin", "in/big.bin")
    temp = _kill_mid_transfer(rec.id, yes_rig.local("in"))
    assert not yes_rig.local("in/big.bin").exists()
    assert _no_rclone_child_left(yes_rig.remote_dir)
    assert temp.exists()
    _recover_and_finish(yes_rig, rec.id)
    assert sha256(yes_rig.local("in/big.bin").read_bytes()) == sha256(data)
    [res] = yes_rig.store.op_results(rec.id)
    assert res.outcome == "done" and res.detail["digest"] == rec.evidence["remote"]["digest"]
    assert _temps(yes_rig.local("in")) == []


def _kill_after_the_move(rig: Rig, folder: Path, new: bytes) -> int | None:
    """Propose replacing big.bin with `new` and accept it; kill -9 the run once the
    approved bytes are under the name while the previous content is still aside. The
    run is stopped (SIGSTOP) as soon as that is seen and killed only if it still holds;
    returns the proposal id, or None when the run ended first (the window is the check
    after the move, tens of ms: a busy box can miss it)."""
    rig.local("big.bin").write_bytes(new)
    rec = rig.upload("big.bin", replace_existing=True)
    proc = start_accept_yes(rec.id)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            names = os.listdir(folder)
            if any(n.startswith(BACKUP_PREFIX) for n in names) and _holds(folder, new):
                os.kill(proc.pid, signal.SIGSTOP)
                names = os.listdir(folder)
                if any(n.startswith(BACKUP_PREFIX) for n in names) and _holds(folder, new):
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(30)
                    return rec.id
                os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.0005)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else proc.returncode
    return None


def _holds(folder: Path, new: bytes) -> bool:
    with contextlib.suppress(FileNotFoundError):
        return (folder / "big.bin").stat().st_size == len(new)
    return False


@pytest.mark.timeout(300)
def test_kill_between_the_move_and_the_backups_delete_then_accept_again(
    yes_rig: Rig,
) -> None:
    """A replacement killed after the approved bytes took the name and before the
    owner's previous content, moved aside, was deleted: accepting again finds the op
    done and deletes the backup (docs/decisions/0007-upload-checks.md). Tried up to four times, each
    with new bytes, until a kill lands in that window."""
    folder = yes_rig.remote_dir
    assert folder is not None
    (folder / "big.bin").write_bytes(b"the owner's previous content\n" * 1000)
    for attempt in range(4):
        new = os.urandom((40 << 20) - attempt)  # each attempt a size of its own
        rec_id = _kill_after_the_move(yes_rig, folder, new)
        if rec_id is not None:
            break
    assert rec_id is not None, "four runs ended before one was seen after the move"
    assert _no_rclone_child_left(folder)
    swept = yes_rig.store.sweep()
    assert swept.interrupted == [rec_id]
    [journal] = yes_rig.store.op_results(rec_id)
    assert [t["side"] for t in journal.detail["temps"]] == ["remote", "backup"]
    r = placet_cli("accept", str(rec_id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert yes_rig.store.get(rec_id).status == "succeeded"
    [res] = yes_rig.store.op_results(rec_id)
    assert res.outcome == "already_done"
    assert sha256((folder / "big.bin").read_bytes()) == sha256(new)
    assert sorted(os.listdir(folder)) == ["big.bin"]
