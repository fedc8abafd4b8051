"""Every placet process of a host runs the host's executor loop: who runs
what when several loops and deciders share one host (`placet.executor.service`).

- Two `placet executor` processes on one host, many proposals approved on another host at
  once: each proposal is claimed once (the claim is a compare-and-set), by one of them.
- A proposal approved by another live process of this host is left to that process (it
  runs it itself), and run by the loop once that process ended without claiming it; a
  decider of the loop's own process says so with `running_here`.
- A proposal made against another drive than the loop's is left approved, not failed.
- `HostLoop.stop()` mid-transfer cancels the run: the proposal ends `interrupted`.
On both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from placet.executor.service import (
    HostLoop,
    left_to_approver,
    reserved,
    run_host_executor,
    running_here,
)
from placet.store import ProposalRecord, Store, open_store
from tests.support.rig import Rig, host_b_settings, start_executor, temp_files

pytestmark = pytest.mark.usefixtures("store_backend")

APPROVE_AND_WAIT = """
import sys
from placet.config import load_settings
from placet.store import open_store
store = open_store(load_settings())
pid = int(sys.argv[1])
rec = store.get(pid)
store.accept(pid, detail={"request_hash": rec.request_hash, "via": "test", "tty": False})
print("approved", flush=True)
sys.stdin.read()
"""


def _approve(store: Store, rec: ProposalRecord) -> None:
    store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test", "tty": False})


def _claims(store: Store, pid: int) -> list[int]:
    events = store.audit_events(proposal_id=pid)
    return [int(e.detail["holder"]["pid"]) for e in events if e.to_status == "executing"]


def _approver(rec_id: int) -> subprocess.Popen[str]:
    """A process of this host that accepts proposal `rec_id`, prints "approved" and waits
    for its stdin to close (APPROVE_AND_WAIT)."""
    return subprocess.Popen(
        [sys.executable, "-c", APPROVE_AND_WAIT, str(rec_id)],
        env=dict(os.environ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(120)
def test_two_executors_on_one_host_run_each_proposal_once(
    configured_rig: Rig, tmp_path: Path
) -> None:
    rig = configured_rig
    recs = []
    for i in range(12):
        rig.write(f"f{i}.txt", f"file {i}\n".encode())
        recs.append(rig.upload(f"f{i}.txt"))
    procs = [start_executor(), start_executor()]
    outs: list[str] = []
    try:
        with open_store(host_b_settings(rig.settings, tmp_path)) as store_b:
            for rec in recs:  # all at once: both loops wake to the same approved list
                _approve(store_b, rec)
        deadline = time.monotonic() + 90
        while any(rig.store.get(r.id).status in ("approved", "executing") for r in recs):
            assert time.monotonic() < deadline, "the executors did not run every proposal"
            time.sleep(0.05)
        for proc in procs:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            outs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    pids = {p.pid for p in procs}
    for rec in recs:
        assert rig.store.get(rec.id).status == "succeeded"
        claims = _claims(rig.store, rec.id)
        assert len(claims) == 1 and claims[0] in pids, claims
    said = [line for out in outs for line in out.splitlines() if line.endswith(" succeeded")]
    assert sorted(said) == sorted(f"proposal {r.id} succeeded" for r in recs)
    assert (rig.remote_dir or Path()).joinpath("f7.txt").read_bytes() == b"file 7\n"
    assert rig.store.verify_audit().ok


@pytest.mark.timeout(60)
def test_a_proposal_is_left_to_the_live_process_that_approved_it(configured_rig: Rig) -> None:
    rig = configured_rig
    rig.write("mine.txt", b"approved by another process\n")
    rec = rig.upload("mine.txt")
    child = _approver(rec.id)
    try:
        assert child.stdout is not None and child.stdout.readline() == "approved\n"
        approval = rig.store.audit_events(proposal_id=rec.id)[-1]
        process = approval.detail["process"]
        assert process["pid"] == child.pid and process["host_id"] == rig.store.host_id
        assert left_to_approver(process, rig.store.host_id)
        assert not left_to_approver(process, "another-host-id")
        stop = threading.Event()
        assert run_host_executor(rig.store, rig.settings, stop=stop, once=True) == []
        assert rig.store.get(rec.id).status == "approved"
        # Past the handoff the loops stop waiting for a live approver that never claimed.
        ran = run_host_executor(rig.store, rig.settings, stop=stop, once=True, handoff_seconds=0)
        assert [(r.proposal_id, r.final and r.final.status) for r in ran] == [(rec.id, "succeeded")]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()

    # The approver ended without claiming: the loop runs it at once.
    rig.write("again.txt", b"approver gone\n")
    rec2 = rig.upload("again.txt")
    child = _approver(rec2.id)
    assert child.stdout is not None and child.stdout.readline() == "approved\n"
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(30) == 0
    assert not left_to_approver(
        rig.store.audit_events(proposal_id=rec2.id)[-1].detail["process"], rig.store.host_id
    )
    ran = run_host_executor(rig.store, rig.settings, stop=threading.Event(), once=True)
    assert [(r.proposal_id, r.final and r.final.status) for r in ran] == [(rec2.id, "succeeded")]


def test_a_decider_of_the_loops_own_process_keeps_what_it_reserved(rig: Rig) -> None:
    rig.write("held.txt", b"run by the decider\n")
    rec = rig.upload("held.txt")
    stop = threading.Event()
    with running_here(rec.id):
        rig.accept(rec)
        assert run_host_executor(rig.store, rig.settings, stop=stop, once=True) == []
        assert rig.store.get(rec.id).status == "approved"
        with running_here(rec.id):  # a second decider racing for it holds its own
            pass
        assert reserved(rec.id)
    assert not reserved(rec.id)
    # Approved by this very process without a reservation: nothing waits for it.
    ran = run_host_executor(rig.store, rig.settings, stop=stop, once=True)
    assert [(r.proposal_id, r.final and r.final.status) for r in ran] == [(rec.id, "succeeded")]


def test_a_proposal_on_another_drive_is_left_approved(rig: Rig, tmp_path: Path) -> None:
    rig.write("there.txt", b"made against the rig's drive\n")
    rec = rig.accept(rig.upload("there.txt"))
    other_drive = tmp_path / "other-drive"
    other_drive.mkdir()
    elsewhere = rig.settings.model_copy(update={"drive": str(other_drive)})
    assert run_host_executor(rig.store, elsewhere, stop=threading.Event(), once=True) == []
    assert rig.store.get(rec.id).status == "approved"  # not failed as drive_changed


@pytest.mark.timeout(120)
def test_stopping_the_host_loop_mid_transfer_interrupts_the_run(rig: Rig, tmp_path: Path) -> None:
    assert rig.remote_dir is not None
    block = os.urandom(1024 * 1024)
    rig.write("big.bin", b"".join(block[i:] + block[:i] for i in range(300)))
    rec = rig.upload("big.bin")
    with open_store(host_b_settings(rig.settings, tmp_path)) as store_b:
        _approve(store_b, rec)
    loop = HostLoop(rig.store, rig.settings).start()
    try:
        deadline = time.monotonic() + 60
        while not any(t.stat().st_size >= 4 << 20 for t in temp_files(rig.remote_dir)):
            assert time.monotonic() < deadline and loop.alive, "the loop did not start it"
            time.sleep(0.002)
        started = time.monotonic()
        loop.stop()
        took = time.monotonic() - started
    finally:
        loop.stop()
    assert not loop.alive and took < 20
    final = rig.store.get(rec.id)
    assert final.status == "interrupted", final.status
    assert not (rig.remote_dir / "big.bin").exists() and temp_files(rig.remote_dir) == []


@pytest.mark.timeout(60)
def test_an_approver_killed_and_not_yet_reaped_is_gone(configured_rig: Rig) -> None:
    """A decider killed right after its accept whose parent has not reaped it yet (an
    agent host that waits later) is a zombie: ended, so the loop runs its proposal at once
    instead of leaving it for the whole handoff."""
    rig = configured_rig
    rig.write("zombie.txt", b"approver killed\n")
    rec = rig.upload("zombie.txt")
    child = _approver(rec.id)
    try:
        assert child.stdout is not None and child.stdout.readline() == "approved\n"
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10  # ended, not reaped: its /proc entry stays
        while b") Z " not in Path(f"/proc/{child.pid}/stat").read_bytes():
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.01)
        process = rig.store.audit_events(proposal_id=rec.id)[-1].detail["process"]
        assert not left_to_approver(process, rig.store.host_id)
        ran = run_host_executor(rig.store, rig.settings, stop=threading.Event(), once=True)
        assert [(r.proposal_id, r.final and r.final.status) for r in ran] == [(rec.id, "succeeded")]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


@pytest.mark.timeout(60)
def test_the_handoff_counts_on_the_injected_clock(configured_rig: Rig) -> None:
    """The loop leaves a live approver's proposal for `handoff_seconds` of its injected
    monotonic clock, never the wall clock: frozen just short of it, the proposal waits;
    past it, the running loop takes it at its next look (faketime cannot move it)."""
    rig = configured_rig
    rig.write("handoff.txt", b"approver alive, never claims\n")
    rec = rig.upload("handoff.txt")
    child = _approver(rec.id)
    now = 1000.0
    looks: list[float] = []  # the loop reads its clock once per look at the proposal

    def clock() -> float:
        looks.append(now)
        return now

    def looked(times: int) -> None:
        seen = len(looks)
        deadline = time.monotonic() + 20
        while len(looks) < seen + times:
            assert time.monotonic() < deadline, "the loop did not look again"
            time.sleep(0.02)

    stop = threading.Event()
    ran: list[object] = []
    loop = threading.Thread(
        target=lambda: ran.extend(
            run_host_executor(rig.store, rig.settings, stop=stop, handoff_seconds=60, clock=clock)
        ),
        daemon=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "approved\n"
        loop.start()
        looked(1)  # it first saw the proposal waiting at 1000.0
        now += 59.9
        looked(2)  # looks again every RECHECK_SECONDS: still left to the live approver
        assert rig.store.get(rec.id).status == "approved" and ran == []
        now += 0.2
        deadline = time.monotonic() + 30
        while rig.store.get(rec.id).status != "succeeded":
            assert time.monotonic() < deadline, "the loop did not take it past the handoff"
            time.sleep(0.05)
    finally:
        stop.set()
        loop.join(20)
        if child.poll() is None:
            child.kill()
        child.wait()
    assert not loop.is_alive()
