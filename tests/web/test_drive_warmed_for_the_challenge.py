"""`placet web` starts the drive's rclone rcd with an accept's challenge (the owner's
click on Accept) and runs the accepted proposal on that drive; a challenge refused, or
not answered within `Runs.warm_seconds` (the owner cancelled the passkey prompt or
left: the page says nothing), leaves no rcd running and nothing approved.

Real parts: `placet web` in-process over a rig's local-folder drive, a software passkey
(`tests.support.passkey`), the real executor."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from placet.executor import execute
from placet.store import ProposalRecord, Store
from tests.support.mcp import rclone_children
from tests.support.passkey import SoftKey
from tests.support.pins import register_pinned
from tests.support.processes import alive
from tests.support.rig import Rig
from tests.support.web import Served

CID = "d2FybS1wYXNza2V5"


def _until(predicate: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def _challenge(served: Served, session: str, rec: ProposalRecord, **body: Any) -> tuple[int, Any]:
    shown = {"request_hash": rec.request_hash, "skip_ops": [], **body}
    status, text = served.post(f"/p/{rec.id}/challenge", shown, session=session)
    return status, json.loads(text)


def _signed_in(rig: Rig) -> tuple[SoftKey, str]:
    """A pinned software passkey, and a session it signed in."""
    key = SoftKey()
    return key, rig.store.open_session(register_pinned(rig.store, CID, key.cose(), "soft").id)


def _warmed_rcd(served: Served) -> int:
    """The rcd pid of the drive warmed for the open challenge."""
    warm = served.runs.warming
    assert warm is not None
    drive = warm.drive()
    assert isinstance(drive, RcloneDrive) and drive.rcd_pid is not None
    return drive.rcd_pid


@pytest.mark.transfers
def test_the_accepted_proposal_runs_on_the_drive_warmed_by_its_challenge(
    rig: Rig, served_rig: Served
) -> None:
    rig.write("a.txt", b"alpha\n")
    rec = rig.upload("a.txt")
    ran_on: list[object] = []

    def executor(store: Store, settings: Settings, proposal_id: int, **kw: Any) -> ProposalRecord:
        ran_on.append(kw.get("drive"))
        return execute(store, settings, proposal_id, **kw)

    served_rig.runs.executor = executor
    key, session = _signed_in(rig)
    status, opts = _challenge(served_rig, session, rec)
    assert status == 200, opts
    pid = _warmed_rcd(served_rig)
    assert served_rig.runs.warming is not None
    drive = served_rig.runs.warming.drive()
    credential = key.assertion(opts, CID, origin=served_rig.origin)
    body = {"nonce": opts["nonce"], "credential": credential}
    status, text = served_rig.post(f"/p/{rec.id}/accept", body, session=session)
    assert status == 200, text
    assert _until(lambda: not served_rig.runs.running(rec.id) and ran_on != [])
    assert ran_on == [drive]
    assert rig.store.get(rec.id).status == "succeeded"
    assert _until(lambda: not alive(pid))  # closed once the run ended
    assert served_rig.runs.warming is None


class _Rcds:
    """The rclone children this process runs beyond those it ran at the start, sampled
    from /proc while in use: every pid seen, and the most alive at once."""

    def __init__(self) -> None:
        self.before = set(rclone_children(os.getpid()))
        self.seen: set[int] = set()
        self.peak = 0
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample)

    def now(self) -> set[int]:
        return set(rclone_children(os.getpid())) - self.before

    def _sample(self) -> None:
        while not self._done.is_set():
            running = self.now()
            self.seen |= running
            self.peak = max(self.peak, len(running))

    def __enter__(self) -> Self:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()


@pytest.mark.parametrize("ending", ["refused", "unanswered"])
def test_a_challenge_refused_or_not_answered_leaves_no_rcd(
    rig: Rig, served_rig: Served, ending: str
) -> None:
    rig.write("a.txt", b"alpha\n")
    rec = rig.upload("a.txt")
    _, session = _signed_in(rig)
    with _Rcds() as rcds:
        if ending == "refused":  # refused after the drive began warming: an op it lacks
            status, said = _challenge(served_rig, session, rec, skip_ops=[7])
            assert status != 200 and said["code"] == "skip_invalid", said
        else:
            served_rig.runs.warm_seconds = 0.5
            status, said = _challenge(served_rig, session, rec)
            assert status == 200, said
            assert _until(lambda: rcds.seen != set() and served_rig.runs.warming is None)
        assert served_rig.runs.warming is None
        assert _until(lambda: rcds.now() == set())
    assert rig.store.get(rec.id).status == "pending"


def test_challenges_in_a_burst_run_at_most_two_rcds_at_a_time(rig: Rig, served_rig: Served) -> None:
    """Each challenge warms the configured drive; a burst of them, valid and refused,
    from many requests at once, reuses the drive warmed and starts no other while one
    starts: the rcds placet web runs stay bounded, whatever a session asks."""
    rig.write("a.txt", b"alpha\n")
    rec = rig.upload("a.txt")
    _, session = _signed_in(rig)

    def burst(n: int) -> None:
        for i in range(6):
            _challenge(served_rig, session, rec, skip_ops=[7] if (i + n) % 2 else [])

    with _Rcds() as rcds:
        clients = [threading.Thread(target=burst, args=(n,)) for n in range(16)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        assert rcds.peak <= 2
        assert _until(lambda: len(rcds.now()) <= 1)
        served_rig.runs.stop()
        assert _until(lambda: rcds.now() == set())
    assert rig.store.get(rec.id).status == "pending"
