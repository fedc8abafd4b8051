"""The connections `placet web` keeps: a deadline to receive a whole request, and a cap.

uvicorn's h11 protocol arms no timer before a request has arrived, nor while a peer
takes none of its answer, so a few hundred stalled connections would exhaust the
process's descriptors. `guarded_h11` adds: a request (head and body) must arrive whole
within `REQUEST_SECONDS` of the connection's opening or of the previous response (else
408 and closed), and a peer whose unread answer fills the buffers must take some of it
within as long (else reset); at most `connection_cap()` connections are open (half the
descriptor limit), and one more drops the one stalled longest in either way (a real
client sends at once and reads its answer, so it is never that one).
`calm_accept_errors` logs failed `accept` retries once a minute, not thousands a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import struct
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "MAX_CONNECTIONS",
    "REQUEST_SECONDS",
    "calm_accept_errors",
    "connection_cap",
    "guarded_h11",
]

log = logging.getLogger(__name__)

REQUEST_SECONDS = 10.0
"""Longest a connection may take to send a whole request, or to take any of an answer
once the buffers are full."""
MAX_CONNECTIONS = 1000
"""Open connections at most, whatever the descriptor limit."""
_WAITING = (h11.IDLE, h11.SEND_BODY)
"""A peer's h11 states before its request is whole."""


def connection_cap() -> int:
    """`MAX_CONNECTIONS`, or half the descriptor limit when that is fewer: the other half
    stays for the database, the listener, rclone's pipes and connections being accepted
    before the cap closes them."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft // 2))


def calm_accept_errors(loop: asyncio.AbstractEventLoop, every: float = 60.0) -> None:
    """On `loop`, report running out of descriptors while accepting once per `every`
    seconds (a warning on the ``placet.web.connections`` logger) instead of a traceback
    per failed `accept`; every other error goes to the handler set before."""
    previous = loop.get_exception_handler()
    said = [-every]

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        e = context.get("exception")
        if isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE):
            if loop.time() - said[0] >= every:
                said[0] = loop.time()
                log.warning(
                    "placet web ran out of file descriptors accepting connections (%s); "
                    "it keeps at most %d open, closing the one waiting longest, and accepts "
                    "again in a second",
                    e.strerror,
                    connection_cap(),
                )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class _Timer:
    """A one-shot `call_later` of `fire` after `seconds` that knows whether it is
    `pending`: from `arm` until it fires or is cancelled."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, fire: Callable[[], None]
    ) -> None:
        self._loop, self._seconds, self._fire = loop, seconds, fire
        self._handle: asyncio.TimerHandle | None = None

    @property
    def pending(self) -> bool:
        return self._handle is not None

    def arm(self) -> None:
        self._handle = self._loop.call_later(self._seconds, self._fired)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fired(self) -> None:
        self._handle = None
        self._fire()


def guarded_h11(
    request_seconds: float = REQUEST_SECONDS, cap: int | None = None
) -> type[asyncio.Protocol]:
    """The h11 protocol class with the request deadline and the connection cap (the cap
    from `connection_cap()` when None), for `uvicorn.Config(http=...)`."""
    limit = connection_cap() if cap is None else cap

    class GuardedH11(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline = _Timer(self.loop, request_seconds, self._expired)
            self._stall = _Timer(self.loop, request_seconds, self._stalled)
            self._since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._since = self.loop.time()
            self._deadline.arm()
            self._make_room()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            self._deadline.cancel()
            super().on_response_complete()
            self._since = self.loop.time()
            self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.cancel()
            self._stall.cancel()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()
            if not self._stall.pending:
                self._since = self.loop.time()
                self._stall.arm()

        def resume_writing(self) -> None:
            self._stall.cancel()
            super().resume_writing()

        def _stalled(self) -> None:
            if self.flow.write_paused:
                self._reset()

        def _reset(self) -> None:
            """Drop the connection at once: a reset, not a close, which would keep its
            unsent answer (megabytes of kernel buffers) trying to reach a peer that
            takes none of it."""
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.transport.abort()

        def _waiting(self) -> bool:
            return self.conn.their_state in _WAITING and not self.transport.is_closing()

        def _droppable(self) -> bool:
            """Waiting for a whole request, or stalled on an answer it does not read."""
            return self._waiting() or (self._stall.pending and not self.transport.is_closing())

        def _track(self) -> None:
            if not self._waiting():
                self._deadline.cancel()
            elif not self._deadline.pending:
                self._deadline.arm()

        def _expired(self) -> None:
            if not self._waiting():
                return
            text = (
                f"request_timeout: placet web waits {request_seconds:g} s for a whole "
                "request; this one did not arrive in time\n"
            ).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text)
            )
            self.transport.close()

        def _make_room(self) -> None:
            open_ = [c for c in self.connections if not c.transport.is_closing()]
            if len(open_) <= limit:
                return
            stalled = [
                c for c in open_ if c is not self and isinstance(c, GuardedH11) and c._droppable()
            ]
            victim = min(stalled, key=lambda c: c._since) if stalled else self
            victim._reset()

    return GuardedH11
