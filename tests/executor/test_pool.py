"""A sync's file transfers run `Settings.transfers` at a time (placet.executor.pool):
every op re-checks and journals as before, a stale op does not stop the others, more
than one transfer is really in flight, and a cancel kills every rclone child, leaves no
temp and no partial file, and the proposal can be accepted again.

Everything is real: planned by the sync service, executed through `execute` with the
rclone binary against a local-folder remote, journaled in the SQLite store.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.drive import RcloneDrive
from placet.drive.proc import Children, child_env, default_rclone_path, spawn
from placet.errors import ConfigError
from placet.executor import ProgressEvent, execute
from placet.executor.batch import BATCH_OPS
from placet.store import ProposalRecord
from placet.sync.propose import propose_sync
from placet.sync.service import SyncService
from tests.support.rig import PLACET, Rig, make_rig, temp_names, write_config

_EARLIER: set[int] = set()
"""rclone children of this pytest process alive before the current rig (other tests')."""


def _rig(settings: Settings, tmp_path: Path, drive: RcloneDrive, transfers: int) -> Rig:
    _EARLIER.clear()
    _EARLIER.update(_rclone_pids())
    remote = Path(drive.spec)
    return make_rig(settings.model_copy(update={"transfers": transfers}), drive, tmp_path, remote)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    d = tmp_path / "drive"
    d.mkdir()
    return d


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tree(rig: Rig, n: int, size: int = 0) -> list[str]:
    names = []
    for i in range(n):
        rel = f"d{i % 3}/f{i:03d}.bin" if i % 2 else f"f{i:03d}.txt"
        rig.write(rel, os.urandom(size) if size else f"file {i}\n".encode() * (i + 1))
        names.append(rel)
    return names


def _propose(rig: Rig) -> ProposalRecord:
    svc = SyncService(rig.store, rig.settings)
    plan = svc.make_plan(
        rig.ctx,
        svc.folder(rig.ctx, "", None),
        "",
        include_hidden=False,
        allow_empty_side=False,
    )
    rec, created = propose_sync(svc, rig.ctx, plan_id=plan.id, decisions={}, reason="pool")
    assert created
    return rec


def _rclone_children(rig: Rig) -> list[int]:
    """pids of this rig's rclone transfer children (`rcat`/`cat`; daemons and children
    alive before the rig excluded)."""
    return [p for p in _rclone_pids(rig.drive.rcd_pid) if p not in _EARLIER]


def _rclone_pids(rcd_pid: int | None = None) -> list[int]:
    """pids of this process's rclone transfer children (`rclone rcat` / `rclone cat`)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid != me or comm != "rclone" or int(entry) == rcd_pid:
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # Transfers are `rclone rcat` (upload) and `rclone cat` (download); other rclone
        # children of this pytest process (another test's rcd, a session's `rclone serve
        # webdav`) are not this rig's transfers.
        if b"rcat" in argv or b"cat" in argv:
            found.append(int(entry))
    return found


def _assert_synced(rig: Rig, names: list[str]) -> None:
    assert rig.remote_dir is not None
    for rel in names:
        assert _sha(rig.remote_dir / rel) == _sha(rig.local(rel)), rel
    assert temp_names(rig.remote_dir) == []


def test_forty_files_four_at_a_time(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    rig = _rig(settings, tmp_path, make_drive(str(remote)), transfers=4)
    names = _tree(rig, 40)
    (remote / "far").mkdir()
    for i in range(6):  # downloads share the pool with the uploads
        (remote / "far" / f"r{i}.bin").write_bytes(os.urandom(1000 + i))
        names.append(f"far/r{i}.bin")
    rec = _propose(rig)
    final = rig.run(rec)

    assert final.status == "succeeded", rig.store.op_results(rec.id)
    results = rig.store.op_results(rec.id)
    kinds = [r.op["kind"] for r in results]
    assert kinds.count("upload") == 40 and kinds.count("mkdir") == 3
    assert kinds.count("download") == 6
    assert {r.outcome for r in results} == {"done"}
    _assert_synced(rig, names)
    assert temp_names(rig.root.path) == []
    # More than one transfer was in flight at once: the pool's own count. (What the
    # progress events show the owner while several run depends on when the 0.1 s tick
    # falls; test_review_panel_shows_ops_in_flight_and_ops_ended slows the transfers so
    # that it is certain.)
    assert final.summary is not None
    assert final.summary["transfers"]["limit"] == 4
    assert 2 <= final.summary["transfers"]["max_in_flight"] <= 4
    # At most 4 units at once; a unit of small new files is a batch of up to BATCH_OPS
    # (placet.executor.batch), each listed while it runs.
    assert max(len(e.in_flight) for e in rig.events) <= 4 * BATCH_OPS
    # Result events: one per op, ops_done counts up, bytes never go backwards.
    ended = [e for e in rig.events if e.op_result is not None]
    assert [e.ops_done for e in ended] == list(range(1, 50))
    done = [e.bytes_done for e in rig.events]
    assert done == sorted(done) and done[-1] == rig.events[-1].bytes_total > 0
    # Folders were created before any file op started.
    first_file = next(i for i, e in enumerate(ended) if e.op_result.op["kind"] != "mkdir")
    assert all(e.op_result.op["kind"] == "mkdir" for e in ended[:first_file])
    assert first_file == 3
    assert _rclone_children(rig) == []


def test_a_stale_op_does_not_stop_the_others(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    rig = _rig(settings, tmp_path, make_drive(str(remote)), transfers=4)
    names = _tree(rig, 40)
    rec = _propose(rig)
    rig.write("f010.txt", b"edited after the plan, longer than before\n" * 30)
    (remote / "f020.txt").write_bytes(b"appeared on the drive")  # the target appeared

    final = rig.run(rec)
    assert final.status == "failed"
    outcomes = {r.op.get("remote_path"): r.outcome for r in rig.store.op_results(rec.id)}
    assert outcomes.pop("f010.txt") == "stale" and outcomes.pop("f020.txt") == "stale"
    assert set(outcomes.values()) == {"done"} and len(outcomes) == 41  # 38 files, 3 folders
    assert not (remote / "f010.txt").exists()
    assert (remote / "f020.txt").read_bytes() == b"appeared on the drive"
    _assert_synced(rig, [n for n in names if n not in ("f010.txt", "f020.txt")])

    again = rig.run(rec)  # re-accepted: the done ones are already_done, not sent twice
    outcomes = {r.op.get("remote_path"): r.outcome for r in rig.store.op_results(rec.id)}
    assert again.status == "failed" and again.attempt == 2
    assert outcomes.pop("f010.txt") == "stale" and outcomes.pop("f020.txt") == "stale"
    assert set(outcomes.values()) == {"already_done"}


def test_transfers_one_runs_one_at_a_time(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    rig = _rig(settings, tmp_path, make_drive(str(remote)), transfers=1)
    names = _tree(rig, 12)
    final = rig.run(_propose(rig))
    assert final.status == "succeeded"
    assert final.summary is not None and final.summary["transfers"]["max_in_flight"] == 1
    # One unit at a time: the ops in flight are one batch at most.
    assert max(len(e.in_flight) for e in rig.events) <= BATCH_OPS
    _assert_synced(rig, names)


@pytest.mark.timeout(180)
def test_cancel_kills_every_transfer_and_accepting_again_completes(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    # --bwlimit makes each rcat take ~2 s, so several are surely mid-stream at the cancel.
    slow = make_drive(str(remote), flags=("--bwlimit", "2M"))
    slow.transfers.rcd_stream_backends = frozenset()  # each upload an rclone rcat child
    rig = _rig(settings, tmp_path, slow, transfers=3)
    names = _tree(rig, 8, size=4 << 20)
    rec = _propose(rig)
    rig.accept(rec)
    cancel = threading.Event()
    children_at_cancel: list[int] = []

    def progress(ev: ProgressEvent) -> None:
        rig.events.append(ev)
        # Cancel once two rclone transfers are really running (an op in flight may still be
        # re-checking its evidence before its child starts, on a loaded box).
        if not cancel.is_set() and len(ev.in_flight) >= 2 and ev.bytes_done > 0:
            running = _rclone_children(rig)
            if len(running) >= 2:
                children_at_cancel.extend(running)
                cancel.set()

    final = execute(rig.store, rig.settings, rec.id, drive=slow, progress=progress, cancel=cancel)
    assert final.status == "interrupted"
    assert len(children_at_cancel) >= 2  # several rclone transfers were running...
    assert _rclone_children(rig) == []  # ...and none outlived the cancel
    results = rig.store.op_results(rec.id)
    cancelled = [r for r in results if r.outcome == "failed"]
    assert cancelled and all(r.detail["code"] == "cancelled" for r in cancelled)
    assert len([r for r in results if r.op["kind"] != "mkdir"]) < 8  # no new op started
    assert temp_names(remote) == []
    for rel in names:  # a real name holds the approved bytes or nothing
        assert not (remote / rel).exists() or _sha(remote / rel) == _sha(rig.local(rel))

    again = rig.run(rec)
    assert again.status == "succeeded", rig.store.op_results(rec.id)
    _assert_synced(rig, names)
    assert _rclone_children(rig) == []


def test_children_group_kills_what_other_threads_spawned(tmp_path: Path) -> None:
    group = Children()
    started = threading.Barrier(4)
    codes: list[int | None] = []

    def run() -> None:
        with group.adopt():  # rclone's rcat waits on stdin until killed
            proc = spawn(
                [str(default_rclone_path()), "rcat", "--", str(tmp_path / "x")],
                child_env({"RCLONE_CONFIG": "/dev/null"}),
                stdin=subprocess.PIPE,
            )
        started.wait()
        codes.append(proc.wait(timeout=30))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    started.wait()
    assert len(group.alive) == 3
    assert group.kill_all() == 3
    for t in threads:
        t.join()
    assert codes == [-9, -9, -9] and group.alive == []


def test_drive_metadata_calls_from_many_threads(
    remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    for i in range(20):
        (remote / f"m{i}.txt").write_text(f"m{i}")
    drive = make_drive(str(remote))
    errors: list[BaseException] = []
    sizes: list[int | None] = []

    def work(k: int) -> None:
        try:
            for i in range(20):
                e = drive.stat(f"m{(i + k) % 20}.txt", include_digest=True)
                assert e is not None and e.digests
                sizes.append(e.size)
        except BaseException as ex:  # collected for the main thread's assertion
            errors.append(ex)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(sizes) == 160


@pytest.mark.timeout(180)
def test_lost_lease_stops_every_transfer(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    slow = make_drive(str(remote), flags=("--bwlimit", "2M"))
    slow.transfers.rcd_stream_backends = frozenset()  # each upload an rclone rcat child
    fast = settings.model_copy(update={"lease_seconds": 1.0, "heartbeat_seconds": 0.2})
    rig = _rig(fast, tmp_path, slow, transfers=3)
    names = _tree(rig, 8, size=4 << 20)
    rec = _propose(rig)
    rig.accept(rec)
    taken = threading.Event()

    def progress(ev: ProgressEvent) -> None:
        if not taken.is_set() and len(ev.in_flight) >= 2 and ev.bytes_done > 0:
            rig.store.mark_interrupted(rec.id, actor="sweeper", why="test: lease taken")
            taken.set()

    final = execute(rig.store, rig.settings, rec.id, drive=slow, progress=progress)
    assert taken.is_set() and final.status == "interrupted"
    assert _rclone_children(rig) == []
    assert temp_names(remote) == []
    done = [r for r in rig.store.op_results(rec.id) if r.outcome == "done"]
    assert len([r for r in done if r.op["kind"] != "mkdir"]) < 8
    assert rig.run(rec).status == "succeeded"
    _assert_synced(rig, names)


def test_transfers_setting_is_read_and_bounded(settings: Settings) -> None:
    assert load_settings().transfers == 4  # rclone's own --transfers default
    write_config(settings, transfers=8)
    assert load_settings().transfers == 8
    for bad in (0, 33):
        write_config(settings, transfers=bad)
        with pytest.raises(ConfigError, match="transfers"):
            load_settings()


@pytest.mark.asyncio
async def test_review_panel_shows_ops_in_flight_and_ops_ended(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    from textual.widgets import Static

    from placet.tui import make_app
    from placet.tui.transfer import TransferPanel
    from tests.support.review import Clock, quiet, settle

    # Every upload alone through `rclone rcat` under a bandwidth limit (no batches): each
    # lasts >= ~0.2 s, so the pool surely shows several in flight whatever the load.
    slow = make_drive(str(remote), flags=("--bwlimit", "1M"))
    slow.transfers.rcd_upload_max = -1
    slow.transfers.rcd_stream_backends = frozenset()
    rig = _rig(settings, tmp_path, slow, transfers=4)
    _tree(rig, 16, size=192 << 10)
    rec = _propose(rig)
    final = rig.run(rec)  # the real executor's events, fed below as the review UI does
    assert final.status == "succeeded"
    flying = next(e for e in rig.events if e.op_result is None and len(e.in_flight) > 1)
    app = make_app(quiet(rig.settings), rig.store, clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        panel = app.query_one(TransferPanel)
        panel.start(rig.store.get(rec.id))
        table = panel.query_one("#transfer-ops")
        for ev in rig.events:  # in the order `DecidingApp.on_transfer_progress` uses
            if ev.op_result is not None:
                panel.op_result(ev.op_result)
            panel.progress(
                ev.op_index,
                ev.op_count,
                ev.bytes_done,
                ev.bytes_total,
                ops_done=ev.ops_done,
                in_flight=ev.in_flight,
            )
            assert panel.running == set(ev.in_flight)
            if ev is flying:
                for i in ev.in_flight:
                    cell = table.get_cell(str(i), "outcome")  # type: ignore[attr-defined]
                    assert cell.plain == "running"
                title = str(panel.query_one("#transfer-title", Static).render())
                assert f"{ev.ops_done:,}/{ev.op_count:,} ops" in title
        await pilot.pause()
        title = str(panel.query_one("#transfer-title", Static).render())
        assert f"{final.summary['ops'] if final.summary else 0}/" in title
        outcomes = {table.get_cell(str(i), "outcome").plain for i in range(19)}  # type: ignore[attr-defined]
        assert outcomes == {"done"} and panel.running == set()


@pytest.mark.timeout(180)
def test_an_error_on_the_calling_thread_leaves_no_transfer_behind(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    # A second Ctrl-C in `placet accept` raises KeyboardInterrupt inside the progress
    # callback, on the coordinating thread: execute must not return with rclone running.
    slow = make_drive(str(remote), flags=("--bwlimit", "2M"))
    slow.transfers.rcd_stream_backends = frozenset()  # each upload an rclone rcat child
    fast = settings.model_copy(update={"lease_seconds": 1.0, "heartbeat_seconds": 0.2})
    rig = _rig(fast, tmp_path, slow, transfers=3)
    names = _tree(rig, 6, size=4 << 20)
    rec = _propose(rig)
    rig.accept(rec)

    def progress(ev: ProgressEvent) -> None:
        if len(ev.in_flight) >= 2 and ev.bytes_done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(rig.store, rig.settings, rec.id, drive=slow, progress=progress)
    assert _rclone_children(rig) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("placet-transfer-")]
    assert temp_names(remote) == []
    deadline = time.monotonic() + 30
    while rig.store.get(rec.id).status == "executing" and time.monotonic() < deadline:
        time.sleep(0.2)  # the lease lapses without the heartbeat; recovery takes it
        rig.store.recover_interrupted()
    assert rig.store.get(rec.id).status == "interrupted"
    assert rig.run(rec).status == "succeeded"
    _assert_synced(rig, names)


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(240)
def test_kill_9_mid_pool_leaves_a_journaled_trail_and_no_rclone(
    settings: Settings, tmp_path: Path, remote: Path, make_drive: Callable[..., RcloneDrive]
) -> None:
    """`placet accept --yes` of a sync killed with SIGKILL while several uploads stream:
    every running rclone dies with it, each worker's temp name was journaled before its
    bytes, recovery marks the proposal interrupted, and accepting again removes exactly
    those temps and completes."""
    rig = _rig(settings, tmp_path, make_drive(str(remote)), transfers=4)
    write_config(rig.settings, drive=rig.drive.spec, allow_yes=True, transfers=4)
    block = os.urandom(1 << 20)
    names = []
    for i in range(4):
        rel = f"big{i}.bin"
        rig.write(rel, b"".join(block[j:] + block[:j] for j in range(i, i + 96)))
        names.append(rel)
    rec = _propose(rig)
    proc = subprocess.Popen(
        [str(PLACET), "accept", str(rec.id), "--yes"],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    rclones: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            growing = [p for p in temp_names(remote) if _size(remote / p) >= 2 << 20]
            if len(growing) >= 2:
                rclones = _children_of(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()  # type: ignore[union-attr]
    assert len(rclones) >= 2  # rcd and at least one rcat (both temps were being written)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in rclones) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in rclones)  # PR_SET_PDEATHSIG from each worker thread
    left = temp_names(remote)
    assert len(left) >= 2
    for rel in names:  # a real name holds the approved bytes or nothing
        assert not (remote / rel).exists() or _sha(remote / rel) == _sha(rig.local(rel))
    assert rig.store.recover_interrupted() == [rec.id]  # the holder is dead on this host
    journaled = {
        t["path"]
        for r in rig.store.op_results(rec.id)
        if r.detail.get("code") == "in_progress"
        for t in r.detail.get("temps", [])
    }
    assert set(left) <= journaled  # every temp on the drive is named in the journal

    again = rig.run(rec)
    assert again.status == "succeeded", rig.store.op_results(rec.id)
    assert again.summary is not None
    assert {f"remote:{p}" for p in left} <= set(again.summary["temps_removed"])
    _assert_synced(rig, names)


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0
