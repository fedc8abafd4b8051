"""Waking whoever waits for the queue to change: executors, review UIs, web pages.

On PostgreSQL every write transaction that appends an audit event (every lifecycle
transition) also runs `NOTIFY placet_change`, delivered when it commits, to every
connection that ran `LISTEN placet_change`, on any host; a waiter sleeps in the server's
socket until then, no polling (docs/decisions/0022-live-changes.md).
On SQLite a waiter keeps the mechanism placet always had: it polls the file's
`PRAGMA data_version` (a cheap read of a private connection) every `POLL_SECONDS`.

A wake-up means "something changed, read again", never what changed: a waiter that
missed nothing but woke spuriously only reads once more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

CHANNEL = "placet_change"
NOTIFY_SQL = f"NOTIFY {CHANNEL}"
"""Run inside a write transaction; PostgreSQL delivers it at commit, never on rollback."""

POLL_SECONDS = 0.2
"""How often a waiter on SQLite reads the data version."""

_SLICE = 0.5
"""Longest a PostgreSQL waiter sleeps before looking at its stop event."""


class ChangeWaiter:
    """Waits until the store changes. Build with `Store.change_waiter()`; close it.

    `wait(timeout, stop)` returns True as soon as something changed since the waiter was
    made or last returned True, False when `timeout` seconds passed (or `stop` was set)
    first. One thread uses a waiter; each waiter holds its own connection on PostgreSQL.
    When that connection fails (the server restarted), `wait` raises `failed(error)`
    (the store's StoreError): the waiter is dead, and whoever used it makes a new one and
    reads everything again (`placet.store.reconnect`).
    """

    def __init__(
        self,
        *,
        version: Callable[[], int] | None = None,
        listener: Any = None,
        close: Callable[[], None] | None = None,
        failed: Callable[[Exception], Exception] | None = None,
    ) -> None:
        self._version = version
        self._listener = listener  # a psycopg connection that ran LISTEN, or None
        self._close = close
        self._failed = failed
        self._seen = version() if version is not None else 0

    @property
    def listens(self) -> bool:
        """True on PostgreSQL (woken by NOTIFY), False on SQLite (polling)."""
        return self._listener is not None

    def wait(self, timeout: float, stop: threading.Event | None = None) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            if stop is not None and stop.is_set():
                return False
            left = deadline - time.monotonic()
            if self._listener is not None:
                if self._notified(min(max(left, 0.0), _SLICE)):
                    return True
            else:
                assert self._version is not None
                now = self._version()
                if now != self._seen:
                    self._seen = now
                    return True
                if left > 0:
                    time.sleep(min(POLL_SECONDS, left))
            if left <= 0:
                return False

    def _notified(self, seconds: float) -> bool:
        got = False
        try:
            for _ in self._listener.notifies(timeout=seconds, stop_after=1):
                got = True
            if got:  # what queued meanwhile says the same: read once, not once per commit
                for _ in self._listener.notifies(timeout=0):
                    pass
        except Exception as e:  # the driver's: the server went away (a restart)
            if self._failed is None:
                raise
            raise self._failed(e) from e
        return got

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None

    def __enter__(self) -> ChangeWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
