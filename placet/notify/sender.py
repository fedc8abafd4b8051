"""The sender: per placet process, a thread that groups events, and one per channel that sends.

Each round records `expiring` events for proposals 5 minutes from expiry (no transition
happens then) and groups new events into one message per kind and session once the
session is quiet (`burst_quiet_s`, at most `burst_window_s`); events with no channel,
older than `STALE`, or naming only decided proposals are skipped. One worker thread per
channel (`placet.notify.worker`) sends, saying each message again from the proposals'
state (`Sender.current`), retrying with `backoff`: a hanging channel delays no other. A
session that ends flushes its events for at most `FLUSH_S`. Between rounds it sleeps in
`Store.change_waiter()`, and after a lost connection reconnects and LISTENs again
(`placet.store.reconnect`). Senders sharing a database group each event once and claim
each delivery once by compare-and-set (docs/decisions/0031-notifications.md)."""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from placet.config import Settings
from placet.errors import NotFound, PlacetError
from placet.notify import channels as ch
from placet.notify.content import render
from placet.notify.worker import ChannelWorker
from placet.store import Store, open_store
from placet.store.outbox import Outbox
from placet.store.outbox_rows import CLAIM_S, STALE, Claim, EventRow, Rendered
from placet.store.reconnect import Reconnecting

log = logging.getLogger("placet.notify")

TICK_S = 0.1
WAITING = ("proposed", "expiring")
"""Event kinds that say proposals wait for the owner: true only while they are pending."""
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
"""Deliveries of one channel claimed at once: few enough to send them all, each within
the channel's `TIMEOUT_S`, before their claim (`CLAIM_S`) lapses and another sender may
take them over (so none is sent by two live processes)."""
FLUSH_S = 1.5
"""Longest a session's end waits for its notifications to go out (module docstring)."""
FLUSH_POLL_S = 0.05

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
        self._retry_lock = threading.Lock()  # channel workers schedule retries
        self._workers: dict[str, ChannelWorker] = {}

    # ---- one round --------------------------------------------------------------------

    def tick(self) -> int:
        """One round: expiry scan (when due), grouping, then sending each channel's due
        deliveries (`send_due`). Returns deliveries sent."""
        self.prepare(self.clock())
        return self.send_due()

    def prepare(self, now: datetime) -> None:
        """A round's work up to sending: the expiry scan and housekeeping when due, and
        grouping."""
        self._held = False
        with self._retry_lock:
            if self._retry_at is not None and now >= self._retry_at:
                self._retry_at = None  # due now: claimed, or scheduled again if it fails
        if self._next_expiry_scan is None or now >= self._next_expiry_scan:
            self._next_expiry_scan = now + timedelta(seconds=EXPIRY_SCAN_S)
            if self.configured:
                self.outbox.add_expiring(now)
        if self._next_prune is None or now >= self._next_prune:
            self._next_prune = now + timedelta(seconds=PRUNE_S)
            self.outbox.give_up_stale(now)
            self.outbox.prune(now)
        self.group(now)

    def group(self, now: datetime, *, at_once: bool = False) -> list[int]:
        """Make messages of the new events that are ready (module docstring), or of all
        of them when `at_once` (a flush); returns the ids of the messages it made."""
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
            if not at_once and now - last < quiet and now - first < window:
                self._held = True
                continue
            content = self.current(kind, [e.proposal_id for e in group], now)
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

    def current(self, kind: str, proposal_ids: Sequence[int], now: datetime) -> Rendered | None:
        """The message about `proposal_ids` as their state stands at `now`: a `proposed`
        or `expiring` message names only the proposals still pending (one withdrawn,
        discarded, accepted or expired meanwhile waits for nobody), and is None when none
        is; a `failed` or `interrupted` one names each proposal that still exists."""
        records = []
        for pid in dict.fromkeys(proposal_ids):
            try:
                rec = self.store.get(pid)
            except NotFound:
                continue
            if kind in WAITING and rec.status != "pending":
                continue  # decided meanwhile: nothing to tell
            records.append(rec)
        if not records:
            return None
        return render(kind, records, minimal=self.notify.detail == "minimal", now=now)

    def send_due(self) -> int:
        """Send the due deliveries of every channel this process can send through, each
        channel in its own thread (`send_channel`); returns how many were sent."""
        names = list(self.channels)
        if len(names) <= 1:
            return sum(self.send_channel(n) for n in names)
        with ThreadPoolExecutor(len(names), thread_name_prefix="placet-notify") as pool:
            return sum(pool.map(self.send_channel, names))

    def send_channel(self, name: str) -> int:
        """Claim and send the due deliveries of channel `name`, `CLAIM_BATCH` at a time."""
        sent = 0
        while not self._stop.is_set():
            claims = self.outbox.claim(
                holder=self.holder, channels=(name,), now=self.clock(), limit=CLAIM_BATCH
            )
            if not claims:
                return sent
            for claim in claims:
                sent += self._send(claim)
        return sent

    def _send(self, claim: Claim) -> int:
        channel = self.channels[claim.channel]
        now = self.clock()
        content = self.current(claim.kind, claim.proposal_ids, now)
        if content is None:  # every proposal it named was decided since it was grouped
            self.outbox.dropped(
                claim,
                holder=self.holder,
                reason="not sent: the proposals it named were decided before it went out",
                now=now,
            )
            log.info("notify %s delivery %s dropped: its proposals were decided",
                     claim.channel, claim.delivery_id)  # fmt: skip
            return 0
        try:
            channel.send(claim.uid, content)
        except ch.DeliveryFailed as e:
            final = not e.retryable or claim.attempt >= MAX_ATTEMPTS
            now = self.clock()
            retry_at = None if final else now + timedelta(seconds=backoff(claim.attempt))
            with self._retry_lock:
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
        with self._retry_lock:
            if self._retry_at is not None:
                wait = min(wait, (self._retry_at - self.clock()).total_seconds())
        return max(TICK_S, wait)

    # ---- the thread -------------------------------------------------------------------

    def _round(self) -> None:
        """A round of the running sender: prepare, then wake the workers of the channels
        with due deliveries (they send; this thread never waits on a receiver)."""
        try:
            now = self.clock()
            self.prepare(now)
            for name in self.outbox.due_channels(tuple(self._workers), now=now):
                self._workers[name].wake()
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
        self._workers = {
            n: ChannelWorker(n, self.send_channel, self._stop).start() for n in self.channels
        }
        self._thread = threading.Thread(target=self._run, name="placet-notify", daemon=True)
        self._thread.start()
        return self

    def flush(self, within: float = FLUSH_S) -> bool:
        """Group every new event now and wait, at most `within` seconds, until no
        delivery of this process's channels is due or being sent by it. True when
        nothing was left; what is left stays in the outbox for the next process."""
        end = time.monotonic() + within
        try:
            if self.configured:
                self.group(self.clock(), at_once=True)
            while True:
                due = self.outbox.due_channels(
                    tuple(self._workers), now=self.clock(), holder=self.holder
                )
                if not due:
                    return True
                if time.monotonic() >= end:
                    return False
                for name in due:
                    self._workers[name].wake()
                self._stop.wait(FLUSH_POLL_S)
        except PlacetError as e:
            log.warning("notify sender: flush: %s: %s", e.error_code, e.message)
            return False

    def stop(self, timeout: float = TIMEOUT_JOIN_S, *, flush: float = 0.0) -> None:
        """Stop, after flushing for at most `flush` seconds; a send still in flight then
        is cut off (`placet.notify.channels.post`)."""
        running = self._thread is not None and not self._stop.is_set()
        if flush > 0 and running and not self.flush(flush):
            log.info("notify: leaving unsent notifications to the next placet process")
        self._stop.set()
        end = time.monotonic() + timeout
        for worker in self._workers.values():
            worker.join(max(0.0, end - time.monotonic()))
        if self._thread is not None:
            self._thread.join(max(0.0, end - time.monotonic()))


class Running:
    """A started sender with its own store connection; `close()` flushes, stops both."""

    def __init__(self, sender: Sender, store: Store) -> None:
        self.sender = sender
        self.store = store

    def close(self) -> None:
        """Flush (for at most `FLUSH_S`), then stop the sender and close its store."""
        self.sender.stop(flush=FLUSH_S)
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
