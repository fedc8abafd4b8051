"""Riding out a database server restart: the backoff, the tests of a lost connection and
the messages every placet process holding PostgreSQL open shares.

A long-running loop (`placet executor`, the host loop, the notification sender) runs its
session through `Reconnecting.run`: when the connection is lost it says so ("database
connection lost: ...; reconnecting in 2.0s"), waits a jittered `Backoff` (0.5 s doubling
to 10 s) and runs the session again until stopped. A session LISTENs first, then rescans
everything it serves: a NOTIFY sent while disconnected is lost, and a NOTIFY is a
wake-up only. One call the restarting server refused before committing anything
(`restarting`) is made again, bounded (`riding_out`): the store's calls for a few
seconds, opening the store for up to `STARTUP_WAIT_S`, said on stderr
(docs/decisions/0020-postgresql-connections.md).
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from placet.store.db import PG_GONE_STATES, is_disconnect

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_S = 0.5
"""The first wait before reconnecting."""
MAX_S = 10.0
"""The longest wait between two reconnection attempts."""
STARTUP_WAIT_S = 30.0
"""Longest a process opening the store waits for a server that is restarting."""
CALL_WAIT_S = 8.0
"""Longest one store call waits for a server that is restarting before it fails."""

_RESTARTING = (
    "connection refused",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
)
"""What libpq says when a connection attempt meets a server that is down or restarting
(its SQLSTATE is not passed on at connect time): never an error of the login itself,
such as a wrong password or a database that does not exist."""


class Backoff:
    """Waits that double from `first` to `cap`, each between 75% and 100% of that."""

    def __init__(
        self,
        first: float = FIRST_S,
        cap: float = MAX_S,
        *,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.first = first
        self.cap = cap
        self._rand = rand
        self._n = 0

    def next(self) -> float:
        """The next wait, in seconds."""
        base = min(self.cap, self.first * 2**self._n)
        self._n += 1
        return float(base * (0.75 + 0.25 * self._rand()))

    def reset(self) -> None:
        """Start again from `first` (after a success)."""
        self._n = 0


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or getattr(cur, "orig", None)
    return seen


def connection_lost(exc: BaseException) -> bool:
    """True when `exc` (a `StoreError`, SQLAlchemy's error, or the driver's own) comes
    from a lost or refused connection to the PostgreSQL server
    (`placet.store.db.is_disconnect` anywhere along its causes). Never on SQLite."""
    return any(is_disconnect(e) for e in _chain(exc))


def restarting(exc: BaseException) -> bool:
    """True when `exc` comes from a server that is down or restarting and committed
    nothing of the call: a connection attempt it refused (`_RESTARTING`), or a session it
    ended with SQLSTATE 57P01-57P03 (a shutdown: the open transaction is rolled back).
    Such a call is safe to make again. A connection that merely broke ("server closed
    the connection unexpectedly") is not: a COMMIT may have been applied unanswered."""
    return any(
        getattr(e, "sqlstate", None) in PG_GONE_STATES
        or (is_disconnect(e) and any(m in str(e).lower() for m in _RESTARTING))
        for e in _chain(exc)
    )


def reason(exc: BaseException) -> str:
    """The driver's own first line for `exc` (e.g. "consuming input failed: server closed
    the connection unexpectedly"), else `exc`'s first line."""
    for e in reversed(_chain(exc)):
        text = str(e).strip()
        if text:
            return text.splitlines()[0].strip()
    return type(exc).__name__


def say_on_stderr(line: str) -> None:
    """Write `line` to stderr (a terminal command's way to say what it is doing)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def riding_out(
    attempt: Callable[[], T],
    *,
    wait_s: float = CALL_WAIT_S,
    say: Callable[[str], None] | None = None,
    what: str = "the database server",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`attempt()`, made again after a `Backoff` while it fails because the server is
    restarting (`restarting`), for at most `wait_s` seconds in all; then its last error
    is raised. `say` (default: logged at INFO) is told each wait."""
    backoff = Backoff()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return attempt()
        except Exception as e:
            left = deadline - time.monotonic()
            if not restarting(e) or left <= 0:
                raise
            delay = min(backoff.next(), left)
            (say or log.info)(
                f"{what} is not accepting connections ({reason(e)}); trying again in {delay:.1f}s"
            )
            sleep(delay)


class Reconnecting:
    """Runs a session again after its connection to the database was lost (module
    docstring), until `stop` is set. `say` is told every loss and every reconnection."""

    def __init__(
        self,
        stop: threading.Event,
        say: Callable[[str], None],
        *,
        backoff: Backoff | None = None,
    ) -> None:
        self.stop = stop
        self.say = say
        self.backoff = backoff or Backoff()
        self.lost = 0
        """How many times the connection was lost."""
        self._down = False

    def connected(self) -> None:
        """Call once the session is connected again (its LISTEN done), before it rescans:
        after a loss, says "reconnected; rescanning" and starts the backoff over."""
        if self._down:
            self._down = False
            self.backoff.reset()
            self.say("reconnected; rescanning")

    def run(self, session: Callable[[], T]) -> T | None:
        """`session()`'s result; after a lost connection (`connection_lost`) it is run
        again following a backoff. None when `stop` was set while waiting. Any other
        exception is raised."""
        while True:
            try:
                return session()
            except Exception as e:
                if not connection_lost(e):
                    raise
                delay = self.backoff.next()
                said = "still no database connection" if self._down else "database connection lost"
                if not self._down:
                    self._down = True
                    self.lost += 1
                self.say(f"{said}: {reason(e)}; reconnecting in {delay:.1f}s")
                if self.stop.wait(delay):
                    return None
