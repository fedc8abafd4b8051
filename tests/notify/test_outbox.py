"""The outbox in one process with an injected clock: events written with their audit event,
grouping a burst, claims by compare-and-set, back-off, final failure, expiry events.

Channels are the real ntfy and webhook channels posting to a real listener on 127.0.0.1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from placet.config import Settings, load_settings
from placet.notify import channels as ch
from placet.notify.sender import EXPIRY_SCAN_S, MAX_ATTEMPTS, TICK_S, Sender, backoff
from placet.store import Store, open_store
from placet.store.outbox import Outbox
from tests.support.db import raw_db
from tests.support.notify import T0, Clock, Listener, WebhookReceiver, notify_toml
from tests.support.notify import propose as _propose

pytestmark = pytest.mark.usefixtures("store_backend")

SECRET = "s3cret-for-tests"


def _settings(home: Path, listener: Listener, **kw: object) -> Settings:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text(notify_toml(listener, **kw))  # type: ignore[arg-type]
    return load_settings()


@pytest.fixture
def outbox_store(placet_home: Path, listener: Listener) -> Iterator[Store]:
    s = open_store(_settings(placet_home, listener))
    yield s
    s.close()


def _channels(outbox_store: Store) -> dict[str, ch.Channel]:
    n = outbox_store.settings.notify
    assert n.ntfy is not None and n.webhook is not None
    return {
        "ntfy": ch.Ntfy(n.ntfy.url, n.ntfy.priority, n.ntfy.click, "tok"),
        "webhook": ch.Webhook(n.webhook.url, SECRET),
    }


def _events(outbox_store: Store) -> list[tuple[str, int, str]]:
    with raw_db(outbox_store.settings) as con:
        rows = con.execute("SELECT kind, proposal_id, state FROM notify_event ORDER BY id")
        return [tuple(r) for r in rows.fetchall()]


def test_an_event_commits_with_its_audit_event_and_only_then(outbox_store: Store) -> None:
    pid = _propose(outbox_store, "a")
    assert _events(outbox_store) == [("proposed", pid, "new")]
    # A refused creation (same pending request) writes neither an audit event nor an event.
    _propose(outbox_store, "a")
    assert len(_events(outbox_store)) == 1
    outbox_store.discard(pid, now=T0 + timedelta(seconds=1))
    assert len(_events(outbox_store)) == 1  # a discard is the owner's own act: nothing to tell


def test_a_burst_of_one_session_is_one_message_on_each_channel(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    ids = [
        _propose(outbox_store, f"d{i}", at=T0 + timedelta(milliseconds=50 * i)) for i in range(10)
    ]
    other = _propose(outbox_store, "other", run="run-b", at=T0)
    clock.advance(0.2)
    assert sender.tick() == 0  # run-a is still proposing (quiet 0.3 s not reached)
    clock.advance(0.6)
    assert sender.tick() == 4  # two messages (run-a, run-b) on two channels
    hooks, topics = listener.on("/hook"), listener.on("/")
    assert len(hooks) == 2 and len(topics) == 2
    burst = next(h.json() for h in hooks if len(h.json()["proposals"]) == 10)
    assert [p["id"] for p in burst["proposals"]] == ids
    assert burst["title"] == "placet: 10 proposals wait for you"
    single = next(h.json() for h in hooks if len(h.json()["proposals"]) == 1)
    assert single["proposals"][0]["id"] == other
    assert sender.tick() == 0  # nothing sent twice


def test_a_session_that_never_pauses_is_sent_after_the_window(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    for i in range(12):  # one every 0.2 s: never quiet for 0.3 s
        _propose(outbox_store, f"d{i}", at=clock())
        assert sender.tick() == 0 or i >= 10
        clock.advance(0.2)
    assert len(listener.on("/hook")) == 1  # the window (2 s) closed once


def test_webhook_signature_verifies_with_the_secret(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    pid = _propose(outbox_store, "signed")
    clock.advance(1)
    sender.tick()
    (hook,) = listener.on("/hook")
    assert WebhookReceiver(SECRET).refuse(hook, time.time()) is None
    assert hook.headers["x-placet-delivery"] == hook.json()["delivery"]
    assert WebhookReceiver("other").refuse(hook, time.time()) == "bad signature"
    (topic,) = listener.on("/")
    body = topic.json()
    assert topic.headers["authorization"] == "Bearer tok"
    assert body["topic"] == "placet-topic" and body["priority"] == 4
    assert body["click"] == f"http://127.0.0.1:9/review/p/{pid}"  # the one proposal's page
    assert "drive:signed" in body["message"]


def test_a_channel_down_retries_with_backoff_and_sends_once(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    _propose(outbox_store, "later")
    clock.advance(1)
    listener.down()
    assert sender.tick() == 0
    log = {d.channel: d for d in Outbox(outbox_store.engine).log()}
    assert log["ntfy"].state == "pending" and log["ntfy"].attempts == 1
    assert "cannot reach" in (log["ntfy"].last_error or "")
    assert sender.tick() == 0  # not due yet: the back-off holds it
    assert {d.attempts for d in Outbox(outbox_store.engine).log()} == {1}
    listener.up()
    clock.advance(backoff(1, rand=lambda: 1.0))
    assert sender.tick() == 2
    assert len(listener.on("/hook")) == 1 and len(listener.on("/")) == 1
    clock.advance(120)
    assert sender.tick() == 0
    assert {d.state for d in Outbox(outbox_store.engine).log()} == {"sent"}


def test_how_long_a_sender_woken_by_changes_may_sleep(
    outbox_store: Store, listener: Listener
) -> None:
    """`next_wait` (what the PostgreSQL sender sleeps in its change waiter when no change
    comes): the expiry scan's period when idle, a tick while a burst is held back, until
    its earliest retry after a failed attempt."""
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    sender.tick()
    assert sender.next_wait() == EXPIRY_SCAN_S
    _propose(outbox_store, "burst", at=clock())
    sender.tick()  # quiet not reached: held back
    assert sender.next_wait() == TICK_S
    clock.advance(1)
    listener.down()
    assert sender.tick() == 0
    first = backoff(1, rand=lambda: 0.0)
    assert first - 1e-6 <= sender.next_wait() <= backoff(1, rand=lambda: 1.0) + 1e-6
    clock.advance(0.5)
    assert sender.next_wait() <= backoff(1, rand=lambda: 1.0) - 0.5 + 1e-6
    listener.up()
    clock.advance(2)
    assert sender.tick() == 2
    assert sender.next_wait() == EXPIRY_SCAN_S


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
@pytest.mark.timeout(60)
def test_a_running_sender_on_postgresql_is_woken_by_a_proposal(
    store_backend: str, outbox_store: Store, listener: Listener, placet_home: Path
) -> None:
    """The sender's thread sleeps in the change waiter; a proposal committed through
    another connection (another process's, as far as PostgreSQL knows) is sent."""
    sender = Sender(outbox_store.settings, outbox_store, channels=_channels(outbox_store))
    sender.start()
    try:
        with open_store(load_settings()) as other:
            rec, _ = other.create_proposal(
                kind="mkdir",
                request={"kind": "mkdir", "remote_parent": "", "name": "woken"},
                evidence={"remote": {"exists": False}},
                reason="make a folder",
                drive_spec="local:/tmp/x",
                run_id="run-other",
                ttl_seconds=1800,
            )
        assert listener.wait_for(lambda: len(listener.on("/hook")) == 1)
        assert [p["id"] for p in listener.on("/hook")[0].json()["proposals"]] == [rec.id]
    finally:
        sender.stop()


def test_a_receiver_that_refuses_fails_for_good_and_it_is_recorded(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    _propose(outbox_store, "refused")
    clock.advance(1)
    listener.status = 403  # a wrong token: retrying cannot help
    sender.tick()
    log = {d.channel: d for d in Outbox(outbox_store.engine).log()}
    assert log["webhook"].state == "failed" and "HTTP 403" in (log["webhook"].last_error or "")
    listener.status = 503  # retryable, but only MAX_ATTEMPTS times
    _propose(outbox_store, "flaky", at=clock())
    for _ in range(MAX_ATTEMPTS + 2):
        clock.advance(61)
        sender.tick()
    newest = Outbox(outbox_store.engine).log()[0]
    assert newest.state == "failed" and newest.attempts == MAX_ATTEMPTS


def test_two_senders_never_send_one_delivery_twice(outbox_store: Store, listener: Listener) -> None:
    clock = Clock()
    a = Sender(
        outbox_store.settings,
        outbox_store,
        channels=_channels(outbox_store),
        clock=clock,
        holder="a",
    )
    b = Sender(
        outbox_store.settings,
        outbox_store,
        channels=_channels(outbox_store),
        clock=clock,
        holder="b",
    )
    for i in range(5):
        _propose(outbox_store, f"r{i}", run=f"run-{i}")
    clock.advance(1)
    assert a.group(clock()) and not b.group(clock())  # b's compare-and-set loses
    claims_a = a.outbox.claim(holder="a", channels=("ntfy", "webhook"), now=clock(), limit=3)
    claims_b = b.outbox.claim(holder="b", channels=("ntfy", "webhook"), now=clock(), limit=100)
    ids_a = {c.delivery_id for c in claims_a}
    ids_b = {c.delivery_id for c in claims_b}
    assert len(ids_a) == 3 and len(ids_b) == 7 and not ids_a & ids_b
    # A lapsed claim is taken over; the old holder's late record is refused.
    clock.advance(61)
    retaken = b.outbox.claim(holder="b", channels=("ntfy",), now=clock(), limit=100)
    assert retaken and all(c.attempt == 2 for c in retaken)
    lost = [c for c in claims_a if c.delivery_id in {r.delivery_id for r in retaken}]
    assert lost and not a.outbox.sent(lost[0], holder="a", now=clock())
    assert b.outbox.sent(retaken[0], holder="b", now=clock())


def test_failed_and_interrupted_executions_make_events(outbox_store: Store) -> None:
    from placet.store.records import LeaseHolder

    pid = _propose(outbox_store, "will-fail")
    outbox_store.accept(pid, now=T0 + timedelta(seconds=1))
    holder = LeaseHolder.current()
    outbox_store.claim(pid, holder=holder, now=T0 + timedelta(seconds=2))
    outbox_store.mark_interrupted(pid, actor="executor", now=T0 + timedelta(seconds=3))
    outbox_store.accept(pid, now=T0 + timedelta(seconds=4))
    outbox_store.claim(pid, holder=holder, now=T0 + timedelta(seconds=5))
    outbox_store.record_op_result(
        pid,
        holder=holder,
        op_index=0,
        op={"kind": "mkdir"},
        outcome="failed",
        detail={},
        now=T0 + timedelta(seconds=6),
    )
    outbox_store.finish(pid, holder=holder, now=T0 + timedelta(seconds=7))
    kinds = [k for k, p, _ in _events(outbox_store) if p == pid]
    assert kinds == ["proposed", "interrupted", "failed"]


def test_expiring_events_once_per_expiry_and_not_for_short_ttls(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = Sender(
        outbox_store.settings, outbox_store, channels=_channels(outbox_store), clock=clock
    )
    long_ = _propose(outbox_store, "long")
    outbox_store.create_proposal(
        kind="mkdir",
        request={"kind": "mkdir", "remote_parent": "", "name": "short"},
        evidence={"remote": {"exists": False}},
        reason="r",
        drive_spec="local:/tmp/x",
        run_id="run-a",
        ttl_seconds=240,
        now=T0,
    )
    outbox = Outbox(outbox_store.engine)
    assert outbox.add_expiring(T0 + timedelta(minutes=20)) == 0
    at = T0 + timedelta(minutes=26)
    assert outbox.add_expiring(at) == 1
    assert outbox.add_expiring(at) == 0  # once
    assert Outbox(outbox_store.engine).add_expiring(at + timedelta(seconds=5)) == 0
    clock.now = at + timedelta(seconds=1)
    sender.tick()
    (hook,) = [h.json() for h in listener.on("/hook") if h.json()["event"] == "expiring"]
    assert [p["id"] for p in hook["proposals"]] == [long_]
    assert "expire within 5 minutes" in hook["title"] or "expires within" in hook["title"]
    assert json.dumps(hook)  # plain JSON


def test_no_channel_skips_events_instead_of_keeping_them(placet_home: Path) -> None:
    settings = load_settings()
    with open_store(settings) as outbox_store:
        _propose(outbox_store, "nobody-listens")
        sender = Sender(settings, outbox_store, channels={}, clock=Clock())
        sender.tick()
        assert [s for _k, _p, s in _events(outbox_store)] == ["skipped"]


def test_a_channel_no_process_can_send_is_given_up_after_an_hour(
    outbox_store: Store, listener: Listener
) -> None:
    clock = Clock()
    # This sender cannot sign (no webhook secret): it leaves the webhook to others.
    channels = {k: v for k, v in _channels(outbox_store).items() if k != "webhook"}
    sender = Sender(outbox_store.settings, outbox_store, channels=channels, clock=clock)
    _propose(outbox_store, "unsigned")
    clock.advance(1)
    assert sender.tick() == 1  # ntfy only
    states = {d.channel: d.state for d in Outbox(outbox_store.engine).log()}
    assert states == {"ntfy": "sent", "webhook": "pending"}
    clock.advance(3601)
    sender.tick()  # housekeeping runs on a sender's first round, then hourly
    (hook,) = [d for d in Outbox(outbox_store.engine).log() if d.channel == "webhook"]
    assert hook.state == "failed" and "given up" in (hook.last_error or "")
    assert listener.on("/hook") == []
