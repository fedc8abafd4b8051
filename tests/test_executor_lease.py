"""The lease while executing: renewed by the heartbeat (recovery leaves a live executor
alone), lost when recovery took the proposal (the executor stops, writes nothing more),
and the owner's cancel (transfer stopped, temp removed, proposal interrupted)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from executor_fixtures import Rig, make_rig, temp_names

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor import ProgressEvent, execute

pytestmark = pytest.mark.usefixtures("store_backend")

pytest_plugins = ["drive_fixtures"]


@pytest.fixture
def rig(settings: Settings, tmp_path: Path, make_drive: Callable[..., RcloneDrive]) -> Rig:
    remote = tmp_path / "drive"
    remote.mkdir()
    fast = settings.model_copy(update={"lease_seconds": 1.0, "heartbeat_seconds": 0.2})
    return make_rig(fast, make_drive(str(remote)), tmp_path, remote)


def _slow(delay: float) -> Callable[[ProgressEvent], None]:
    def progress(ev: ProgressEvent) -> None:
        if ev.op_result is None:
            time.sleep(delay)  # a slow link: the transfer outlasts several leases

    return progress


def test_heartbeat_keeps_a_live_executor_from_recovery(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("slow.bin", os.urandom(40 * 1024 * 1024))
    rec = rig.upload("slow.bin")
    rig.accept(rec)
    stop = threading.Event()
    recovered: list[int] = []

    def sweeper() -> None:
        while not stop.wait(0.1):
            recovered.extend(rig.store.recover_interrupted())

    t = threading.Thread(target=sweeper)
    t.start()
    try:
        final = execute(rig.store, rig.settings, rec.id, drive=rig.drive, progress=_slow(0.06))
    finally:
        stop.set()
        t.join()
    assert recovered == []
    assert final.status == "succeeded"
    assert final.summary is not None and final.summary["seconds"] > rig.settings.lease_seconds


def test_lost_lease_stops_the_transfer_and_writes_nothing_more(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("lost.bin", os.urandom(40 * 1024 * 1024))
    rec = rig.upload("lost.bin")
    rig.accept(rec)
    taken = threading.Event()

    def progress(ev: ProgressEvent) -> None:
        if ev.bytes_done and not taken.is_set():
            rig.store.mark_interrupted(rec.id, actor="sweeper", why="test: lease taken")
            taken.set()
        time.sleep(0.05)

    final = execute(rig.store, rig.settings, rec.id, drive=rig.drive, progress=progress)
    assert final.status == "interrupted"
    assert not (rig.remote_dir / "lost.bin").exists()
    assert temp_names(rig.remote_dir) == []
    [journal] = rig.store.op_results(rec.id)  # the temp name, journaled before the bytes
    assert journal.detail["code"] == "in_progress"
    again = rig.run(rec)
    assert again.status == "succeeded"


def test_cancel_stops_cleans_up_and_can_be_accepted_again(rig: Rig) -> None:
    assert rig.remote_dir is not None
    rig.write("c.bin", os.urandom(30 * 1024 * 1024))
    rec = rig.upload("c.bin")
    rig.accept(rec)
    cancel = threading.Event()

    def progress(ev: ProgressEvent) -> None:
        if ev.bytes_done:
            cancel.set()

    final = execute(
        rig.store, rig.settings, rec.id, drive=rig.drive, progress=progress, cancel=cancel
    )
    assert final.status == "interrupted"
    [res] = rig.store.op_results(rec.id)
    assert res.outcome == "failed" and res.detail["code"] == "cancelled"
    assert res.detail["retryable"] is True
    assert os.listdir(rig.remote_dir) == []
    assert rig.run(rec).status == "succeeded"
    assert temp_names(rig.remote_dir) == []
