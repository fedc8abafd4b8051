"""kill -9 of the accepting process mid-transfer: nothing appears under the target name,
recovery marks the proposal interrupted at once (the holder is dead on this host), and
accepting again completes with the approved digest and leaves no temporary names.

The process is `placet accept ID --yes` (allow_yes = true in config.toml), killed as soon
as its temporary object (upload) or temporary file (download) holds a few MiB; rclone's
children die with it (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from executor_fixtures import PLACET, Rig, make_rig, placet_cli, sha256, write_config

from placet.config import Settings
from placet.drive import RcloneDrive

pytest_plugins = ["drive_fixtures"]

pytestmark = pytest.mark.usefixtures("store_backend")

SIZE = 200 * 1024 * 1024


@pytest.fixture
def rig(settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> Rig:
    remote = tmp_path / "drive"
    remote.mkdir()
    r = make_rig(settings, make_drive(str(remote)), tmp_path, remote)
    write_config(r.settings, drive=r.drive.spec, allow_yes=True)
    return r


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
    proc = subprocess.Popen(
        [str(PLACET), "accept", str(pid), "--yes"],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
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
def test_kill_during_upload_then_accept_again(rig: Rig) -> None:
    assert rig.remote_dir is not None
    data = _big(rig.local("big.bin"))
    rec = rig.upload("big.bin")
    temp = _kill_mid_transfer(rec.id, rig.remote_dir)
    assert not (rig.remote_dir / "big.bin").exists()
    assert _no_rclone_child_left(rig.remote_dir)
    assert temp.exists() and temp.stat().st_size < SIZE  # a partial temp, under a temp name
    _recover_and_finish(rig, rec.id)
    assert sha256((rig.remote_dir / "big.bin").read_bytes()) == sha256(data)
    [res] = rig.store.op_results(rec.id)
    assert res.outcome == "done" and res.detail["digest"] == rec.evidence["local"]["digest"]
    assert _temps(rig.remote_dir) == []


@pytest.mark.timeout(300)
def test_kill_during_download_then_accept_again(rig: Rig) -> None:
    assert rig.remote_dir is not None
    data = _big(rig.remote_dir / "big.bin")
    rig.local("in").mkdir()
    rec = rig.download("big.bin", "in/big.bin")
    temp = _kill_mid_transfer(rec.id, rig.local("in"))
    assert not rig.local("in/big.bin").exists()
    assert _no_rclone_child_left(rig.remote_dir)
    assert temp.exists()
    _recover_and_finish(rig, rec.id)
    assert sha256(rig.local("in/big.bin").read_bytes()) == sha256(data)
    [res] = rig.store.op_results(rec.id)
    assert res.outcome == "done" and res.detail["digest"] == rec.evidence["remote"]["digest"]
    assert _temps(rig.local("in")) == []
