"""A notification says only what is still so when it goes out: a proposal withdrawn,
discarded or accepted before its message is sent waits for nobody, so the message names
it no more (or is dropped when it named nothing else), on the first attempt and on every
retry. Real ntfy and webhook channels post to a real listener on 127.0.0.1; the clock is
injected."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.notify import channels as ch
from placet.notify.sender import Sender, backoff
from placet.store import Store
from placet.store.outbox import Outbox
from tests.support.notify import Clock, Listener, propose

pytestmark = pytest.mark.usefixtures("store_backend")

RUN = "run-a"


def _sender(store: Store, clock: Clock) -> Sender:
    n = store.settings.notify
    assert n.ntfy is not None and n.webhook is not None
    channels: dict[str, ch.Channel] = {
        "ntfy": ch.Ntfy(n.ntfy.url, n.ntfy.priority, None, None),
        "webhook": ch.Webhook(n.webhook.url, "secret"),
    }
    return Sender(store.settings, store, channels=channels, clock=clock)


def _states(store: Store) -> dict[str, str]:
    return {d.channel: d.state for d in Outbox(store.engine).log()}


def test_a_proposal_withdrawn_after_grouping_is_not_announced(
    notify_store: Store, listener: Listener
) -> None:
    """The agent withdraws 0.3 s after proposing, just after the burst was grouped into
    "1 proposal waits for you": the message must not go out (it went out before)."""
    clock = Clock()
    sender = _sender(notify_store, clock)
    pid = propose(notify_store, "gone", RUN, clock())
    clock.advance(0.35)
    assert sender.group(clock())  # the message is made ...
    notify_store.withdraw(pid, run_id=RUN, now=clock())  # ... and its proposal withdrawn
    clock.advance(0.05)
    assert sender.send_due() == 0
    assert listener.received == []
    states = _states(notify_store)
    assert states == {"ntfy": "dropped", "webhook": "dropped"}
    (row, _) = Outbox(notify_store.engine).log()
    assert "decided before it went out" in (row.last_error or "")


def test_a_proposal_decided_before_grouping_makes_no_message(
    notify_store: Store, listener: Listener
) -> None:
    clock = Clock()
    sender = _sender(notify_store, clock)
    withdrawn = propose(notify_store, "withdrawn", RUN, clock())
    discarded = propose(notify_store, "discarded", RUN, clock())
    notify_store.withdraw(withdrawn, run_id=RUN, now=clock() + timedelta(seconds=0.1))
    notify_store.discard(discarded, now=clock() + timedelta(seconds=0.2))
    clock.advance(1)
    assert sender.tick() == 0
    assert listener.received == [] and Outbox(notify_store.engine).log() == []


def test_a_retry_says_what_is_still_pending_then(notify_store: Store, listener: Listener) -> None:
    """Two proposals, one message; the first attempt fails; one proposal is accepted
    meanwhile: the retry names the other one only ("1 proposal waits"), not the text
    made when the burst was grouped."""
    clock = Clock()
    sender = _sender(notify_store, clock)
    kept = propose(notify_store, "kept", RUN, clock())
    taken = propose(notify_store, "taken", RUN, clock())
    clock.advance(1)
    listener.down()
    assert sender.tick() == 0
    notify_store.accept(taken, now=clock())
    listener.up()
    clock.advance(backoff(1, rand=lambda: 1.0))
    assert sender.tick() == 2
    (hook,) = listener.on("/hook")
    assert hook.json()["title"] == "placet: 1 proposal waits for you"
    assert [p["id"] for p in hook.json()["proposals"]] == [kept]
    (topic,) = listener.on("/")
    assert f"#{kept} " in topic.json()["message"] and f"#{taken} " not in topic.json()["message"]
