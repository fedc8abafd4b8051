"""The sender: one thread per placet process that groups events and sends deliveries.

Each round it records `expiring` events for pending proposals 5 minutes from expiry
(every `EXPIRY_SCAN_S`: no transition happens then), groups new events into one message
per kind and session once the session is quiet for `burst_quiet_s` or `burst_window_s`
after the first, and claims and sends the due deliveries of the channels it can use,
retrying with `backoff` up to `MAX_ATTEMPTS`; events with no channel configured, or older
than `STALE`, are skipped. Between rounds it sleeps in `Store.change_waiter()` for as
long as nothing else is due (`next_wait`). Several senders may share a database: the
outbox's compare-and-set writes group each event once and give each delivery to one
sender at a time (docs/decisions/0031-notifications.md). A failure is logged and retried;
it never reaches proposing.
After a lost connection it reconnects with
backoff and LISTENs again (`placet.store.reconnect`).
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from placet.config import Settings
from placet.errors import NotFound, PlacetError
from placet.notify import channels as ch
from placet.notify.content import render
from placet.store import Store, open_store
from placet.store.outbox import CLAIM_S, STALE, Claim, EventRow, Outbox, Rendered
from placet.store.reconnect import Reconnecting

log = logging.getLogger("placet.notify")

TICK_S = 0.1
GROUP_MAX = 500
"""Most events in one message (one statement's bound variables stay far below SQLite's
limit); the rest of a larger burst makes the next message."""
IDLE_TICK_S = 1.0
"""Between rounds when no channel is configured (events are only skipped then)."""
EXPIRY_SCAN_S = 5.0
PRUNE_S = 3600.0
MAX_ATTEMPTS = 12
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
TIMEOUT_JOIN_S = ch.TIMEOUT_S + 2
CLAIM_BATCH = max(1, int(CLAIM_S // (ch.TIMEOUT_S + 1)))
"""Deliveries claimed at once: few enough to send them all, each within the channel's
`TIMEOUT_S`, before their claim (`CLAIM_S`) lapses and another sender may take them
over (so none is sent by two live processes)."""

Clock = Callable[[], datetime]


def backoff(attempt: int, *, rand: Callable[[], float] = random.random) -> float:
    """Seconds before retry number `attempt` (1-based): 1, 2, 4 ... up to 60, each
    between 75% and 100% of that (jitter, so several senders do not retry in step)."""
    base = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempt - 1))
    return float(base * (0.75 + 0.25 * rand()))


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Sender:
    """Groups and sends (module docstring). `tick()` does one round; `start()` runs
    rounds in a daemon thread until `stop()`."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        channels: dict[str, ch.Channel] | None = None,
        clock: Clock = _utcnow,
        holder: str | None = None,
    ) -> None:
        self.settings = settings
        self.notify = settings.notify
        self.store = store
        self.outbox = Outbox(store.engine, db_label=str(settings.db_path))
        self._stop = threading.Event()
        # `stop()` cuts off a send in flight (a receiver that hangs does not hold the
        # process's exit for the send's whole timeout).
        self.channels = ch.build(self.notify, cancel=self._stop) if channels is None else channels
        self.configured = self.notify.channels()
        self.clock = clock
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._thread: threading.Thread | None = None
        self._next_expiry_scan: datetime | None = None
        self._next_prune: datetime | None = None
        self._held = False  # the last round held a burst back (quiet or window not reached)
        self._retry_at: datetime | None = None  # the earliest retry this sender scheduled

    # ---- one round --------------------------------------------------------------------

    def tick(self) -> int:
        """One round: expiry scan (when due), grouping, sending. Returns deliveries sent."""
        now = self.clock()
        self._held = False
        if self._retry_at is not None and now >= self._retry_at:
            self._retry_at = None  # due now: claimed below, or scheduled again if it fails
        if self._next_expiry_scan is None or now >= self._next_expiry_scan:
            self._next_expiry_scan = now + timedelta(seconds=EXPIRY_SCAN_S)
            if self.configured:
                self.outbox.add_expiring(now)
        if self._next_prune is None or now >= self._next_prune:
            self._next_prune = now + timedelta(seconds=PRUNE_S)
            self.outbox.give_up_stale(now)
            self.outbox.prune(now)
        self.group(now)
        return self.send_due()

    def group(self, now: datetime) -> list[int]:
        """Make messages of the new events that are ready (module docstring); returns
        the ids of the messages this sender made."""
        events = self.outbox.new_events()
        if not events:
            return []
        if not self.configured:
            self.outbox.skip([e.id for e in events])
            return []
        stale = {e.id for e in events if now - e.created_at > STALE}
        self.outbox.skip(sorted(stale))
        groups: dict[tuple[str, str], list[EventRow]] = {}
        for e in events:
            if e.id not in stale:
                group = groups.setdefault((e.kind, e.run_id), [])
                if len(group) < GROUP_MAX:
                    group.append(e)
        quiet = timedelta(seconds=self.notify.burst_quiet_s)
        window = timedelta(seconds=self.notify.burst_window_s)
        made: list[int] = []
        for (kind, run_id), group in groups.items():
            first, last = group[0].created_at, max(e.created_at for e in group)
            if now - last < quiet and now - first < window:
                self._held = True
                continue
            content = self._render(kind, group, now)
            if content is None:
                self.outbox.skip([e.id for e in group])
                continue
            mid = self.outbox.make_message(
                [e.id for e in group],
                kind=kind,
                run_id=run_id,
                content=content,
                channels=self.configured,
                now=now,
            )
            if mid is not None:
                made.append(mid)
        return made

    def _render(self, kind: str, group: list[EventRow], now: datetime) -> Rendered | None:
        records = []
        for pid in dict.fromkeys(e.proposal_id for e in group):
            try:
                rec = self.store.get(pid)
            except NotFound:
                continue
            if kind in ("expiring", "proposed") and rec.status != "pending":
                continue  # decided meanwhile (a standing rule, at once): nothing waits
            records.append(rec)
        if not records:
            return None
        return render(kind, records, minimal=self.notify.detail == "minimal", now=now)

    def send_due(self) -> int:
        """Claim and send the due deliveries of this process's channels."""
        sent = 0
        while not self._stop.is_set():
            claims = self.outbox.claim(
                holder=self.holder,
                channels=tuple(self.channels),
                now=self.clock(),
                limit=CLAIM_BATCH,
            )
            if not claims:
                return sent
            for claim in claims:
                sent += self._send(claim)
        return sent

    def _send(self, claim: Claim) -> int:
        channel = self.channels[claim.channel]
        try:
            channel.send(claim.delivery_id, claim.content)
        except ch.DeliveryFailed as e:
            final = not e.retryable or claim.attempt >= MAX_ATTEMPTS
            now = self.clock()
            retry_at = None if final else now + timedelta(seconds=backoff(claim.attempt))
            if retry_at is not None and (self._retry_at is None or retry_at < self._retry_at):
                self._retry_at = retry_at
            self.outbox.attempt_failed(
                claim, holder=self.holder, error=e.message, retry_at=retry_at, now=now
            )
            (log.warning if final else log.info)(
                "notify %s delivery %s attempt %s failed%s: %s",
                claim.channel,
                claim.delivery_id,
                claim.attempt,
                " for good" if final else "",
                e.message,
            )
            return 0
        self.outbox.sent(claim, holder=self.holder, now=self.clock())
        return 1

    def next_wait(self) -> float:
        """Seconds a sender woken by changes (PostgreSQL) may sleep after the last round
        when no change comes: `TICK_S` while a burst is held back, until its earliest
        scheduled retry, else `EXPIRY_SCAN_S` (the expiry scan, and claims of a dead
        sender lapsing, happen without a transition)."""
        if not self.configured:
            return IDLE_TICK_S
        if self._held:
            return TICK_S
        wait = EXPIRY_SCAN_S
        if self._retry_at is not None:
            wait = min(wait, (self._retry_at - self.clock()).total_seconds())
        return max(TICK_S, wait)

    # ---- the thread -------------------------------------------------------------------

    def _round(self) -> None:
        try:
            self.tick()
        except PlacetError as e:
            log.warning("notify sender: %s: %s (will retry)", e.error_code, e.message)
        except Exception:
            log.exception("notify sender failed (will retry)")

    def _run(self) -> None:
        if self.store.postgres and self.configured:
            self._run_woken()
        while not self._stop.is_set():
            self._round()
            self._stop.wait(TICK_S if self.configured else IDLE_TICK_S)

    def _run_woken(self) -> None:
        """PostgreSQL: rounds between waits in the change waiter (module docstring). A
        lost connection is ridden out (`placet.store.reconnect`: LISTEN again, then a
        round, which reads the whole outbox). Returns when stopped, or when the waiter
        fails otherwise (then the caller ticks)."""
        reconnecting = Reconnecting(self._stop, lambda line: log.warning("notify sender: %s", line))

        def session() -> None:
            with self.store.change_waiter() as waiter:
                reconnecting.connected()
                while not self._stop.is_set():
                    self._round()
                    waiter.wait(self.next_wait(), self._stop)

        try:
            reconnecting.run(session)
        except Exception as e:  # not a lost connection: poll from now on
            message = e.message if isinstance(e, PlacetError) else repr(e)
            log.warning("notify sender polls: the change waiter failed: %s", message)

    def start(self) -> Sender:
        self._thread = threading.Thread(target=self._run, name="placet-notify", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = TIMEOUT_JOIN_S) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


class Running:
    """A started sender with its own store connection; `close()` stops both."""

    def __init__(self, sender: Sender, store: Store) -> None:
        self.sender = sender
        self.store = store

    def close(self) -> None:
        self.sender.stop()
        self.store.close()


def start_sender(settings: Settings) -> Running | None:
    """Start a sender on its own store connection (so it outlives nothing it shares);
    None when it cannot start (logged; notifications never stop placet from working)."""
    try:
        store = open_store(settings)
    except PlacetError as e:
        log.warning("notify sender not started: %s", e.message)
        return None
    try:
        return Running(Sender(settings, store).start(), store)
    except Exception:
        log.exception("notify sender not started")
        store.close()
        return None
