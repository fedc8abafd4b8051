"""Rule approvals reach the owner as one digest: a burst of proposals approved by standing
rules, from any session, is one message naming each rule, and none of them is announced
as waiting (a real ntfy and webhook receiver on 127.0.0.1, an injected clock)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from placet.decisions.standing import approve_by_rule
from placet.drive import configured_spec
from placet.notify.sender import Sender
from placet.rules.approving import RuleApproval
from placet.store import Store
from tests.notify.test_outbox import T0, Clock, _channels, _propose, outbox_store  # noqa: F401
from tests.support.notify import Listener

pytestmark = pytest.mark.usefixtures("store_backend")


def _on_the_drive(store: Store, name: str, run: str, at: datetime) -> int:
    """A mkdir proposal on the configured drive (a rule approves only what the decision
    core's checks let through: the drive is one)."""
    rec, _ = store.create_proposal(
        kind="mkdir", request={"kind": "mkdir", "remote_parent": "", "name": name},
        evidence={"remote": {"exists": False}}, reason="make a folder",
        drive_spec=configured_spec(store.settings), run_id=run, ttl_seconds=1800, now=at,
    )  # fmt: skip
    return rec.id


def test_rule_approvals_of_a_burst_are_one_digest(
    outbox_store: Store,  # noqa: F811
    listener: Listener,
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    ruled = []
    for i in range(6):
        at = T0 + timedelta(milliseconds=40 * i)
        pid = _on_the_drive(outbox_store, f"r{i}", f"run-{i % 2}", at)
        rule = "report-folders" if i % 3 else "weekly-reports"
        approval = RuleApproval(rule, "ab" * 32, "/o/.config/placet/rules.toml")
        approve_by_rule(
            outbox_store, outbox_store.settings, outbox_store.get(pid), approval, now=at
        )
        ruled.append(pid)
    waiting = _propose(outbox_store, "left-to-you", run="run-0", at=T0)
    clock.advance(1.0)
    assert sender.tick() == 4  # the digest and the one waiting, on two channels
    hooks = [h.json() for h in listener.on("/hook")]
    digest = next(h for h in hooks if h["event"] == "rule_approved")
    assert digest["title"] == "placet: 6 proposals approved by your standing rules"
    assert sorted(p["id"] for p in digest["proposals"]) == ruled
    assert {p["rule"] for p in digest["proposals"]} == {"report-folders", "weekly-reports"}
    waits = next(h for h in hooks if h["event"] == "proposed")
    assert [p["id"] for p in waits["proposals"]] == [waiting]
    topic = next(t for t in listener.on("/") if b"standing rules" in t.body)
    assert b"approved by rule report-folders" in topic.body
    assert b"Nothing waits for you" in topic.body
    assert sender.tick() == 0
