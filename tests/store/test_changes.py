"""`Store.change_waiter()`: a waiter wakes when another connection commits a
transition (PostgreSQL: LISTEN/NOTIFY; SQLite: the data version polled), stays asleep
while nothing changes, and a stop event ends its wait."""

from __future__ import annotations

import threading
import time

import pytest

from placet.config import Settings
from placet.store import open_store
from tests.support.proposals import propose_folder

pytestmark = pytest.mark.usefixtures("store_backend")


def test_a_commit_elsewhere_wakes_the_waiter(settings: Settings) -> None:
    with (
        open_store(settings) as waiting_store,
        open_store(settings) as other,
        waiting_store.change_waiter() as waiter,
    ):
        assert waiter.listens == (settings.database is not None)
        assert waiter.wait(0.3) is False  # nothing changed
        woke: list[bool] = []
        t = threading.Thread(target=lambda: woke.append(waiter.wait(30)))
        t.start()  # whether it sleeps before or after the commit, the commit wakes it
        rec, _ = propose_folder(other, "woken", reason="wake up", ttl=600)
        t.join(timeout=40)
        assert woke == [True]  # True only for a change, never for the 30 s passing
        assert waiter.wait(0.3) is False  # the wake-up was consumed
        other.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "test"})
        assert waiter.wait(10) is True


def test_a_stop_event_ends_the_wait(settings: Settings) -> None:
    with open_store(settings) as store, store.change_waiter() as waiter:
        stop = threading.Event()
        # A plain sleep, not threading.Timer: the calendar guard's libfaketime breaks
        # timed condition waits, never nanosleep.
        threading.Thread(target=lambda: (time.sleep(0.2), stop.set())).start()
        start = time.monotonic()
        assert waiter.wait(30, stop) is False
        assert time.monotonic() - start < 20  # the 30 s were not slept out
