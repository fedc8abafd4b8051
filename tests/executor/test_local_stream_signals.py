"""Uploads streaming through rcd to a local folder (2-48 MiB, `RcdUploads.upload_stream`), and
the accepting process or its rcd child stopped under them: kill -9, Ctrl-C once and
twice (SIGINT to its process group) on one file and on a 4-file sync.

Real parts: a local-folder drive, `placet accept ID --yes` as a child in its own process
group (a terminal's foreground job). The rcd child is paused (SIGSTOP) once a temporary
object holds a few MiB, so the stream is surely mid-way when the signal comes.

Checked each time: every rclone child is gone, nothing lands under a target name, and
accepting again lands the approved bytes and leaves no temporary object; after a sync,
the next plan has no op and the baseline's mtime of each uploaded file is the listing's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.names import BACKUP_PREFIX
from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.processes import alive, descendants
from tests.support.rig import (
    Rig,
    placet_cli,
    sha256,
    start_accept_yes,
    temp_names,
    write_config,
)

pytestmark = pytest.mark.timeout(180)

SIZE = 40 << 20  # above RCD_UPLOAD_MAX, below RCD_STREAM_LOCAL_MAX: streams through rcd


def _data(seed: int, mib: int) -> bytes:
    block = os.urandom(1 << 20)
    return b"".join(block[i:] + block[:i] for i in range(seed, seed + mib))


def _all_gone(pids: set[int], within: float = 15) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return set()
        time.sleep(0.05)
    return {p for p in pids if alive(p)}


def _rcd_of(kids: set[int]) -> int:
    rcd = []
    for p in kids:
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b" rcd " in cmd:
            rcd.append(p)
    assert len(rcd) == 1, rcd
    return rcd[0]


def _pause_mid_stream(proc: subprocess.Popen[bytes], folder: Path) -> tuple[set[int], int]:
    """Once a temporary object in `folder` holds 4 MiB, SIGSTOP the rcd child; returns
    the accepting process's descendants then, and the rcd's pid."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for n in temp_names(folder):
            try:
                if (folder / n).stat().st_size >= 4 << 20:
                    kids = descendants(proc.pid)
                    rcd = _rcd_of(kids)
                    os.kill(rcd, signal.SIGSTOP)
                    return kids, rcd
            except FileNotFoundError:
                continue
        if proc.poll() is not None:
            pytest.fail(f"placet accept ended too soon: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.002)
    pytest.fail("no temporary object grew to 4 MiB")
    raise AssertionError("unreachable")


def _resume(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture
def stream_rig(local_rig: Callable[..., Rig]) -> Rig:
    """A local-folder rig whose config.toml allows `placet accept --yes`, 4 transfers."""
    rig = local_rig()
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True, transfers=4)
    return rig


def _accept_big(rig: Rig) -> tuple[bytes, ProposalRecord, subprocess.Popen[bytes]]:
    data = _data(0, SIZE >> 20)
    rig.write("big.bin", data)
    rec = rig.upload("big.bin")
    return data, rec, start_accept_yes(rec.id, own_session=False, lowest_priority=True)


def _accept_again_lands(rig: Rig, rec_id: int, files: dict[str, bytes]) -> None:
    assert rig.remote_dir is not None
    r = placet_cli("accept", str(rec_id), "--yes", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert rig.store.get(rec_id).status == "succeeded"
    for n, data in files.items():
        assert sha256((rig.remote_dir / n).read_bytes()) == sha256(data), n
    assert temp_names(rig.remote_dir) == []


def test_kill_9_mid_stream_leaves_no_rclone_and_accepting_again_lands(stream_rig: Rig) -> None:
    rig = stream_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    rcd = None
    try:
        kids, rcd = _pause_mid_stream(proc, rig.remote_dir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        _resume(rcd)
        _reap(proc)
    assert _all_gone(kids) == set()  # the paused rcd too (PR_SET_PDEATHSIG)
    assert not (rig.remote_dir / "big.bin").exists()
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, {"big.bin": data})


def test_the_rcd_child_killed_mid_stream_fails_and_leaves_no_temp(stream_rig: Rig) -> None:
    rig = stream_rig
    assert rig.remote_dir is not None
    data, rec, proc = _accept_big(rig)
    rcd = None
    try:
        kids, rcd = _pause_mid_stream(proc, rig.remote_dir)
        os.kill(rcd, signal.SIGKILL)
        _, err = proc.communicate(timeout=90)
    finally:
        _resume(rcd)
        _reap(proc)
    assert proc.returncode != 0, err
    assert _all_gone(kids) == set()
    assert not (rig.remote_dir / "big.bin").exists()
    assert temp_names(rig.remote_dir) == [], err  # removed through a fresh rcd
    _accept_again_lands(rig, rec.id, {"big.bin": data})


def _sync_four(rig: Rig) -> tuple[dict[str, bytes], ProposalRecord]:
    files = {f"big{i}.bin": _data(i, 12 + 4 * i) for i in range(4)}
    for n, data in files.items():
        rig.write(n, data)
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="pool")
    return files, rec


def _nothing_to_plan(rig: Rig, files: dict[str, bytes]) -> None:
    """A fresh process's next plan has no op and hashes no remote file: each uploaded
    file's digest was remembered under the mtime the listing reads."""
    svc = SyncService(rig.store, rig.settings)
    again = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    assert again.plan.ops == (), again.plan.ops
    assert svc.remote_files_hashed == 0


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_a_four_file_sync_stops_it_and_a_sync_lands_after(
    stream_rig: Rig, presses: int
) -> None:
    rig = stream_rig
    assert rig.remote_dir is not None
    files, rec = _sync_four(rig)
    proc = start_accept_yes(rec.id, own_session=False, lowest_priority=True)
    rcd = None
    try:
        kids, rcd = _pause_mid_stream(proc, rig.remote_dir)
        os.killpg(proc.pid, signal.SIGINT)
        if presses == 2:
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGINT)
        else:
            time.sleep(0.2)  # the signal lands while rcd is paused
            _resume(rcd)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"placet accept still runs 30 s after {presses} Ctrl-C")
    finally:
        _resume(rcd)
        _reap(proc)
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.returncode != 0, err
    assert _all_gone(kids) == set(), err
    for n, data in files.items():  # a real name holds the approved bytes or nothing
        p = rig.remote_dir / n
        assert not p.exists() or sha256(p.read_bytes()) == sha256(data), n
    if presses == 1:
        assert temp_names(rig.remote_dir) == [], err  # placet cleaned up itself
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, files)
    _nothing_to_plan(rig, files)


def test_a_four_file_sync_through_the_stream_leaves_nothing_to_plan(stream_rig: Rig) -> None:
    rig = stream_rig
    assert rig.remote_dir is not None
    files, rec = _sync_four(rig)
    _accept_again_lands(rig, rec.id, files)
    _nothing_to_plan(rig, files)


def test_replacing_streamed_files_by_a_second_sync_leaves_nothing_to_plan(stream_rig: Rig) -> None:
    """The replacement path (backup aside, temporary object moved on, proof after the
    move) reports the mtime the listing reads too."""
    rig = stream_rig
    assert rig.remote_dir is not None
    files, rec = _sync_four(rig)
    assert rig.run(rec).status == "succeeded"
    changed = {n: _data(7, 3 + i) for i, n in enumerate(sorted(files)[:3])}
    for n, data in changed.items():
        rig.write(n, data)
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    assert sorted(op.remote_path for op in plan.plan.ops) == sorted(changed), plan.plan.ops
    again, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="again")
    assert rig.run(again).status == "succeeded", rig.store.op_results(again.id)
    for n, data in {**files, **changed}.items():
        assert sha256((rig.remote_dir / n).read_bytes()) == sha256(data), n
    assert temp_names(rig.remote_dir) == []
    _nothing_to_plan(rig, {**files, **changed})


def test_a_source_swapped_for_a_symlink_to_the_same_bytes_is_not_streamed(
    stream_rig: Rig, tmp_path: Path
) -> None:
    """Approved: a regular file. At accept: a symlink to a file of the same bytes
    (outside the root). Nothing is read through the link and nothing lands."""
    rig = stream_rig
    assert rig.remote_dir is not None
    data = _data(3, 5)
    src = rig.write("big.bin", data)
    rec = rig.upload("big.bin")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(data)
    st = src.stat()
    os.utime(outside, ns=(st.st_atime_ns, st.st_mtime_ns))
    src.unlink()
    src.symlink_to(outside)
    done = rig.run(rec)
    assert done.status != "succeeded", rig.store.op_results(rec.id)
    assert not (rig.remote_dir / "big.bin").exists()
    assert temp_names(rig.remote_dir) == []


def test_one_file_changed_mid_stream_fails_alone_in_a_four_file_sync(stream_rig: Rig) -> None:
    """Four uploads stream through rcd at once; one source changes under its stream: that
    op is refused and leaves no temporary object, the other three land (its stop closes
    its own stream only)."""
    rig = stream_rig
    assert rig.remote_dir is not None
    folder = rig.remote_dir
    files, rec = _sync_four(rig)
    victim = "big3.bin"  # 24 MiB, the last to end
    flipped = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not flipped.is_set():
            for n in temp_names(folder):
                if n.endswith(victim):
                    with contextlib.suppress(FileNotFoundError):
                        if (folder / n).stat().st_size >= 4 << 20:
                            with open(rig.local(victim), "r+b") as f:
                                f.seek(20 << 20)
                                f.write(b"\xff\x00changed")
                            flipped.set()
                            return
            time.sleep(0.001)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    done = rig.run(rec)
    w.join(5)
    assert flipped.is_set(), "the source was not changed mid-stream"
    outcomes = sorted(r.outcome for r in rig.store.op_results(rec.id))
    assert done.status != "succeeded" and outcomes == ["done", "done", "done", "stale"], outcomes
    for n, data in files.items():
        if n != victim:
            assert sha256((folder / n).read_bytes()) == sha256(data), n
    assert not (folder / victim).exists()
    assert temp_names(folder) == []


@pytest.mark.parametrize("when", ["temp-whole", "backup-seen"])
def test_kill_9_while_a_streamed_replacement_is_placed_loses_nothing(
    stream_rig: Rig, when: str
) -> None:
    """A replacement by a sync: the stream has ended (`temp-whole`) or the owner's object
    has just been moved aside (`backup-seen`) when placet is killed. The target then holds
    the old or the approved bytes, or is aside under a journaled backup name; accepting
    again lands the approved bytes and leaves no temporary object and no backup
    (docs/decisions/0007-upload-checks.md)."""
    rig = stream_rig
    folder = rig.remote_dir
    assert folder is not None
    old = _data(1, 6)
    rig.write("big.bin", old)
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    first, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="first")
    assert rig.run(first).status == "succeeded"
    new = _data(2, 9)
    rig.write("big.bin", new)
    plan = svc.make_plan(
        rig.ctx, svc.folder(rig.ctx, "", None), "", include_hidden=False, allow_empty_side=False
    )
    rec, _ = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="replace")
    proc = start_accept_yes(rec.id, own_session=False, lowest_priority=True)
    hit = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not hit:
            for n in os.listdir(folder):
                if when == "backup-seen" and n.startswith(BACKUP_PREFIX):
                    hit = True
                elif when == "temp-whole" and n.startswith(".placet-tmp-"):
                    with contextlib.suppress(FileNotFoundError):
                        hit = (folder / n).stat().st_size == len(new)
                if hit:
                    os.kill(proc.pid, signal.SIGKILL)
                    break
        proc.wait(30)
    finally:
        _reap(proc)
    p = folder / "big.bin"
    if p.exists():
        assert sha256(p.read_bytes()) in (sha256(old), sha256(new))
    else:  # aside: its backup holds the old bytes
        aside = [n for n in os.listdir(folder) if n.startswith(BACKUP_PREFIX)]
        assert [sha256((folder / n).read_bytes()) for n in aside] == [sha256(old)]
    rig.store.sweep()
    if rig.store.get(rec.id).status != "succeeded":
        r = placet_cli("accept", str(rec.id), "--yes", env=dict(os.environ))
        assert r.returncode == 0, r.stderr
    assert sha256(p.read_bytes()) == sha256(new)
    # killed after the move: the target proven to hold the approved bytes and the backup
    # what the owner saw, the next run deletes the backup (the op's last step)
    assert sorted(n for n in os.listdir(folder) if n != "big.bin") == []


def test_the_rcd_child_killed_under_four_streams_leaves_one_clean_state(stream_rig: Rig) -> None:
    """rcd killed (not paused) while four uploads stream through it: every stream fails
    at once and the workers reach for rcd together; placet ends with no rclone left, no
    target holds other bytes, no temporary object stays, and accepting again lands all."""
    rig = stream_rig
    folder = rig.remote_dir
    assert folder is not None
    files, rec = _sync_four(rig)
    proc = start_accept_yes(rec.id, own_session=False, lowest_priority=True)
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            sizes = []
            for n in temp_names(folder):
                with contextlib.suppress(FileNotFoundError):
                    sizes.append((folder / n).stat().st_size)
            if len([s for s in sizes if s >= 2 << 20]) >= 2:
                kids = descendants(proc.pid)
                os.kill(_rcd_of(kids), signal.SIGKILL)
                break
            time.sleep(0.002)
        _, err = proc.communicate(timeout=90)
    finally:
        _reap(proc)
    assert kids, "no two streams were seen at once"
    assert _all_gone(kids | descendants(proc.pid)) == set()
    for n, data in files.items():
        p = folder / n
        assert not p.exists() or sha256(p.read_bytes()) == sha256(data), n
    if proc.returncode == 0:  # every stream had ended: nothing was cut
        return
    assert temp_names(folder) == [], err
    rig.store.sweep()
    _accept_again_lands(rig, rec.id, files)
    _nothing_to_plan(rig, files)
