"""The lease while executing: renewed by the heartbeat (recovery leaves a live executor
alone), lost when recovery took the proposal (the executor stops, writes nothing more),
and the owner's cancel (transfer stopped, temp removed, proposal interrupted)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import pytest

from placet.executor import ProgressEvent, execute
from tests.support.rig import Rig, temp_names

pytestmark = pytest.mark.usefixtures("store_backend")


@pytest.fixture
def short_lease_rig(local_rig: Callable[..., Rig]) -> Rig:
    """A rig whose lease lasts 1 s, renewed every 0.2 s."""
    return local_rig(lease_seconds=1.0, heartbeat_seconds=0.2)


def _slow(delay: float) -> Callable[[ProgressEvent], None]:
    def progress(ev: ProgressEvent) -> None:
        if ev.op_result is None:
            time.sleep(delay)  # a slow link: the transfer outlasts several leases

    return progress


def test_heartbeat_keeps_a_live_executor_from_recovery(short_lease_rig: Rig) -> None:
    assert short_lease_rig.remote_dir is not None
    short_lease_rig.write("slow.bin", os.urandom(40 * 1024 * 1024))
    rec = short_lease_rig.upload("slow.bin")
    short_lease_rig.accept(rec)
    stop = threading.Event()
    recovered: list[int] = []

    def sweeper() -> None:
        while not stop.wait(0.1):
            recovered.extend(short_lease_rig.store.recover_interrupted())

    t = threading.Thread(target=sweeper)
    t.start()
    try:
        final = execute(
            short_lease_rig.store,
            short_lease_rig.settings,
            rec.id,
            drive=short_lease_rig.drive,
            progress=_slow(0.06),
        )
    finally:
        stop.set()
        t.join()
    assert recovered == []
    assert final.status == "succeeded"
    assert (
        final.summary is not None
        and final.summary["seconds"] > short_lease_rig.settings.lease_seconds
    )


def test_lost_lease_stops_the_transfer_and_writes_nothing_more(short_lease_rig: Rig) -> None:
    assert short_lease_rig.remote_dir is not None
    short_lease_rig.write("lost.bin", os.urandom(40 * 1024 * 1024))
    rec = short_lease_rig.upload("lost.bin")
    short_lease_rig.accept(rec)
    taken = threading.Event()

    def progress(ev: ProgressEvent) -> None:
        if ev.bytes_done and not taken.is_set():
            short_lease_rig.store.mark_interrupted(rec.id, actor="sweeper", why="test: lease taken")
            taken.set()
        time.sleep(0.05)

    final = execute(
        short_lease_rig.store,
        short_lease_rig.settings,
        rec.id,
        drive=short_lease_rig.drive,
        progress=progress,
    )
    assert final.status == "interrupted"
    assert not (short_lease_rig.remote_dir / "lost.bin").exists()
    assert temp_names(short_lease_rig.remote_dir) == []
    [journal] = short_lease_rig.store.op_results(
        rec.id
    )  # the temp name, journaled before the bytes
    assert journal.detail["code"] == "in_progress"
    again = short_lease_rig.run(rec)
    assert again.status == "succeeded"


def test_cancel_stops_cleans_up_and_can_be_accepted_again(short_lease_rig: Rig) -> None:
    assert short_lease_rig.remote_dir is not None
    short_lease_rig.write("c.bin", os.urandom(30 * 1024 * 1024))
    rec = short_lease_rig.upload("c.bin")
    short_lease_rig.accept(rec)
    cancel = threading.Event()

    def progress(ev: ProgressEvent) -> None:
        if ev.bytes_done:
            cancel.set()

    final = execute(
        short_lease_rig.store,
        short_lease_rig.settings,
        rec.id,
        drive=short_lease_rig.drive,
        progress=progress,
        cancel=cancel,
    )
    assert final.status == "interrupted"
    [res] = short_lease_rig.store.op_results(rec.id)
    assert res.outcome == "failed" and res.detail["code"] == "cancelled"
    assert res.detail["retryable"] is True
    assert os.listdir(short_lease_rig.remote_dir) == []
    assert short_lease_rig.run(rec).status == "succeeded"
    assert temp_names(short_lease_rig.remote_dir) == []
