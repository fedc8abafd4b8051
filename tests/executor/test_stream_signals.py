"""A big upload streaming through rcd to sftp, and the accepting process stopped under it:
kill -9, Ctrl-C (SIGINT to its process group, once and twice), SIGTERM; and the sftp
server killed mid-stream.

Real parts: `rclone serve sftp` (private to the test, so it can be paused and killed),
an rclone config naming it, `placet accept ID --yes` as a child in its own process
group (what a terminal's foreground job is). The server is paused (SIGSTOP) once the
temporary object holds a few MiB, so the stream is surely mid-way when the signal
comes; it is resumed right after.

Checked each time: every rclone child of the accepting process is gone (its children
share placet's session but sit in their own process groups, so a terminal's Ctrl-C never
reaches them: placet must stop them, or `PR_SET_PDEATHSIG` does); nothing lands under
the target name; accepting again uploads the approved bytes and leaves no temporary
object.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import Settings
from placet.drive import drive_for
from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.processes import alive, descendants
from tests.support.rig import (
    Rig,
    make_rig,
    placet_cli,
    sha256,
    start_accept_yes,
    temp_names,
    write_config,
)

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote

pytestmark = pytest.mark.timeout(180)

SIZE = 48 << 20  # above RCD_UPLOAD_MAX, below RCD_STREAM_MAX: streams through rcd


def _all_gone(pids: set[int], within: float = 15) -> set[int]:
    """Those of `pids` still alive after waiting up to `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.05)
    return {p for p in pids if alive(p)}


@pytest.fixture
def sftp_rig(
    settings: Settings,
    tmp_path: Path,
    start_server: Callable[[str], ServedRemote],
    rclone_bin: Path,
    rclone_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Rig, ServedRemote]]:
    """A rig over a private `rclone serve sftp` (remote `box:up`, an rclone config file),
    whose config.toml allows `placet accept --yes`; and the server."""
    served = start_server("sftp")
    conf = tmp_path / "rclone.conf"
    env = {"RCLONE_CONFIG": str(conf), "HOME": str(rclone_home), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [str(rclone_bin), "config", "create", "box", "sftp", "host=127.0.0.1",
         f"port={served.port}", "user=placet", f"pass={served.obscured}",
         "known_hosts_file=none", "--non-interactive", "--no-obscure"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    monkeypatch.delenv("RCLONE_CONFIG_PASS", raising=False)
    (served.root / "up").mkdir()
    drive = drive_for(settings.model_copy(update={"drive": "box:up"}))
    try:
        rig = make_rig(settings, drive, tmp_path, served.root / "up")
        write_config(rig.settings, drive="box:up", allow_yes=True)
        yield rig, served
    finally:
        drive.close()


def _accept_big(rig: Rig) -> tuple[bytes, ProposalRecord, subprocess.Popen[bytes]]:
    """A `SIZE`-byte local big.bin proposed for upload, and `placet accept ID --yes` started
    on it in its own process group: the bytes, the proposal, the accepting process."""
    block = os.urandom(1 << 20)
    data = b"".join(block[i:] + block[:i] for i in range(SIZE >> 20))
    rig.write("big.bin", data)
    rec = rig.upload("big.bin")
    return data, rec, start_accept_yes(rec.id, own_session=False)


def _pause_mid_stream(
    proc: subprocess.Popen[bytes], served: ServedRemote, folder: Path
) -> set[int]:
    """Once a temporary object in `folder` holds 8 MiB, SIGSTOP the server; returns the
    accepting process's descendants (its rclone children) at that moment."""
    assert served.proc is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for n in temp_names(folder):
            try:
                if (folder / n).stat().st_size >= 8 << 20:
                    os.kill(served.proc.pid, signal.SIGSTOP)
                    kids = descendants(proc.pid)
                    assert kids, "placet accept has no rclone child"
                    return kids
            except FileNotFoundError:
                continue
        if proc.poll() is not None:
            pytest.fail(f"placet accept ended too soon: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.002)
    pytest.fail("no temporary object grew to 8 MiB")
    raise AssertionError("unreachable")


def _resume(served: ServedRemote) -> None:
    assert served.proc is not None
    os.kill(served.proc.pid, signal.SIGCONT)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill `proc` if it still runs; wait for it either way."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _ctrl_c_twice(proc: subprocess.Popen[bytes]) -> float:
    """SIGINT to `proc`'s group twice, 0.5 s apart; fails unless it then ends within 20 s.
    Seconds from the second SIGINT to its end."""
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        pytest.fail("placet accept still runs 20 s after the second Ctrl-C")
    return time.monotonic() - t0


def _accept_again_lands(rig: Rig, rec_id: int, data: bytes) -> None:
    assert rig.remote_dir is not None
    r = placet_cli("accept", str(rec_id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert rig.store.get(rec_id).status == "succeeded"
    assert sha256((rig.remote_dir / "big.bin").read_bytes()) == sha256(data)
    assert temp_names(rig.remote_dir) == []


def test_kill_9_mid_stream_leaves_no_child_and_accepting_again_lands(
    sftp_rig: tuple[Rig, ServedRemote],
) -> None:
    rig, served = sftp_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        _resume(served)
        _reap(proc)
    assert _all_gone(kids) == set()
    assert not (rig.remote_dir / "big.bin").exists()
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, data)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_group_mid_stream_stops_every_child_and_leaves_nothing(
    sftp_rig: tuple[Rig, ServedRemote], sig: signal.Signals
) -> None:
    """SIGINT (Ctrl-C: placet cancels, cleans up, exits) and SIGTERM, sent to the
    accepting process's group as a terminal or a service manager would."""
    rig, served = sftp_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        os.killpg(proc.pid, sig)
        time.sleep(0.2)  # the signal lands while rcd is still blocked on the server
        _resume(served)
        proc.wait(60)
    finally:
        _resume(served)
        _reap(proc)
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.returncode != 0, err
    assert _all_gone(kids) == set()
    assert not (rig.remote_dir / "big.bin").exists()
    if sig == signal.SIGINT:  # placet cleaned up itself
        assert temp_names(rig.remote_dir) == [], err
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, data)


def test_ctrl_c_twice_mid_stream_quits_at_once_and_leaves_no_child(
    sftp_rig: tuple[Rig, ServedRemote],
) -> None:
    """The second Ctrl-C quits without waiting for the cleanup (the server stays paused
    meanwhile, so a cleanup through rcd could not finish)."""
    rig, served = sftp_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        quit_after = _ctrl_c_twice(proc)
        assert _all_gone(kids) == set()
    finally:
        _resume(served)
        _reap(proc)
    assert quit_after < 20
    assert not (rig.remote_dir / "big.bin").exists()
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, data)


def test_the_sftp_server_killed_mid_stream_fails_retryably_and_a_new_server_lands_it(
    sftp_rig: tuple[Rig, ServedRemote],
) -> None:
    rig, served = sftp_rig
    assert rig.remote_dir is not None and served.proc is not None
    data, rec, proc = _accept_big(rig)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        os.kill(served.proc.pid, signal.SIGKILL)
        served.proc.wait()
        served.proc = None
        _, err = proc.communicate(timeout=90)
    finally:
        _reap(proc)
    assert proc.returncode == 5, err  # the drive could not be reached: try again
    assert _all_gone(kids) == set()
    assert not (rig.remote_dir / "big.bin").exists()
    served.start()  # same port, same folder
    _accept_again_lands(rig, rec.id, data)


def test_the_rcd_child_killed_mid_stream_fails_clearly_and_leaves_no_temp(
    sftp_rig: tuple[Rig, ServedRemote],
) -> None:
    rig, served = sftp_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        rcd = [
            p
            for p in kids
            if b" rcd " in Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
        ]
        assert len(rcd) == 1
        os.kill(rcd[0], signal.SIGKILL)
        _resume(served)
        _, err = proc.communicate(timeout=90)
    finally:
        _resume(served)
        _reap(proc)
    assert proc.returncode != 0, err
    assert b"rcd" in err, err
    assert _all_gone(kids) == set()
    assert not (rig.remote_dir / "big.bin").exists()
    assert temp_names(rig.remote_dir) == [], err  # removed through a fresh rcd
    _accept_again_lands(rig, rec.id, data)


def test_ctrl_c_twice_while_the_pool_streams_quits_at_once_and_a_sync_lands_after(
    sftp_rig: tuple[Rig, ServedRemote],
) -> None:
    """A sync of three big files through the transfer pool (4 workers, each streaming
    through rcd), the server stalled: the second Ctrl-C ends placet within seconds, no
    rclone child stays, and accepting again syncs the approved bytes."""
    rig, served = sftp_rig
    assert rig.remote_dir is not None
    write_config(rig.settings, drive="box:up", allow_yes=True, transfers=4)
    block = os.urandom(1 << 20)
    files = {}
    for i in range(3):
        files[f"big{i}.bin"] = b"".join(block[j:] + block[:j] for j in range(i, i + 24))
        rig.write(f"big{i}.bin", files[f"big{i}.bin"])
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="pool")
    proc = start_accept_yes(rec.id, own_session=False)
    try:
        kids = _pause_mid_stream(proc, served, rig.remote_dir)
        _ctrl_c_twice(proc)
        assert _all_gone(kids) == set()
    finally:
        _resume(served)
        _reap(proc)
    assert not [n for n in files if (rig.remote_dir / n).exists()]
    rig.store.sweep()
    r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert {n: (rig.remote_dir / n).read_bytes() for n in files} == files
    assert temp_names(rig.remote_dir) == []
