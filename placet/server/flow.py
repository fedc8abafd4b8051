"""How much work one client may queue in `placet serve`: two bounds, one per layer.

The SDK's dispatcher starts a task per request read and keeps it until answered, with no
cap for stdio: a client that never reads its answers made the server hold 5,000 requests
(1.2 GB). placet adds two bounds (docs/decisions/0016-stdio-limits.md):
- **Outstanding requests** (`GatedReadStream`, `GatedWriteStream`): from read to answer,
  at most `MAX_OUTSTANDING` requests and `MAX_OUTSTANDING_BYTES` of lines; past either,
  stdin is not read (back-pressure, since an error would itself wait on the full pipe).
  One request is always admitted when none is outstanding.
- **Tool calls** (`ToolSlots`): at most `MAX_RUNNING_TOOLS` run and `MAX_WAITING_TOOLS`
  wait; one more is answered at once with the retryable `server_busy`, so a reading
  client slows down instead of waiting blind. This bound sits under the first."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from placet.errors import LimitExceeded
from placet.server.streams import WrappedReadStream, WrappedStream

MAX_OUTSTANDING = 128
"""Requests read from stdin and not yet answered; past this, stdin is not read."""
MAX_OUTSTANDING_BYTES = 64 * 1024 * 1024
"""Characters of outstanding request lines; past this, stdin is not read (the first
request is admitted whatever its size)."""
MAX_RUNNING_TOOLS = 16
"""Tool calls executing at once."""
MAX_WAITING_TOOLS = 48
"""Tool calls waiting for a running slot; one more is refused with `server_busy`."""


class _Ticket:
    __slots__ = ("released", "size")

    def __init__(self, size: int) -> None:
        self.released = False
        self.size = size


def _key(request_id: object) -> tuple[bool, object]:
    # JSON-RPC ids are strings or numbers, and "1" is not 1.
    return (isinstance(request_id, str), request_id)


class RequestGate:
    """Counts outstanding requests; `admit` waits while `limit` of them, or `byte_limit`
    characters of their lines, are outstanding."""

    def __init__(self, limit: int = MAX_OUTSTANDING, byte_limit: int = MAX_OUTSTANDING_BYTES):
        self.limit = limit
        self.byte_limit = byte_limit
        self.outstanding = 0
        self.outstanding_bytes = 0
        self._by_id: dict[tuple[bool, object], list[_Ticket]] = {}
        self._freed: anyio.Event | None = None

    def _full(self, size: int) -> bool:
        return self.outstanding >= self.limit or (
            self.outstanding > 0 and self.outstanding_bytes + size > self.byte_limit
        )

    async def admit(self, request_id: object, size: int = 0) -> Callable[[], Awaitable[None]]:
        """Wait for room, count request `request_id` (its line `size` characters long);
        returns its unanswered-release hook."""
        while self._full(size):
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()
        self.outstanding += 1
        self.outstanding_bytes += size
        ticket = _Ticket(size)
        self._by_id.setdefault(_key(request_id), []).append(ticket)

        async def unanswered() -> None:
            self._release(request_id, ticket)

        return unanswered

    def answered(self, request_id: object) -> None:
        """The answer to `request_id` was handed to the writer: free its place."""
        tickets = self._by_id.get(_key(request_id))
        if tickets:
            self._release(request_id, tickets[0])

    def _release(self, request_id: object, ticket: _Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        key = _key(request_id)
        tickets = self._by_id.get(key, [])
        if ticket in tickets:
            tickets.remove(ticket)
        if not tickets:
            self._by_id.pop(key, None)
        self.outstanding -= 1
        self.outstanding_bytes -= ticket.size
        if self._freed is not None:
            self._freed.set()
            self._freed = None


class GatedReadStream(WrappedReadStream):
    """The transport's read stream, admitting each request through `gate` (duck-types the
    SDK's `ReadStream`, including the sender context it exposes as `last_context`)."""

    def __init__(self, inner: Any, gate: RequestGate) -> None:
        self.inner = inner
        self.gate = gate

    async def receive(self) -> Any:
        item = await self.inner.receive()
        size = int(getattr(self.inner, "last_line_chars", 0))  # set by wire's screen
        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
            hook = await self.gate.admit(item.message.id, size)
            if item.metadata is None:
                item = dataclasses.replace(
                    item, metadata=ServerMessageMetadata(on_request_unanswered=hook)
                )
        return item


class GatedWriteStream(WrappedStream):
    """The transport's write stream; an answer written frees its request's place."""

    def __init__(self, inner: Any, gate: RequestGate) -> None:
        self.inner = inner
        self.gate = gate

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self.inner.send(item)
        finally:
            msg = item.message
            if isinstance(msg, JSONRPCResponse | JSONRPCError) and msg.id is not None:
                self.gate.answered(msg.id)


class ToolSlots:
    """At most `running` tool calls at once, `waiting` more queued; past both, busy."""

    def __init__(self, running: int = MAX_RUNNING_TOOLS, waiting: int = MAX_WAITING_TOOLS):
        self.running = running
        self.waiting = waiting
        self.admitted = 0
        self._sem: anyio.Semaphore | None = None

    def busy(self, tool: str) -> LimitExceeded:
        return LimitExceeded(
            f"placet is busy: {self.running} tool calls are running and {self.waiting} "
            f"are waiting, so {tool} was not started; wait for some answers, then retry",
            code="server_busy",
            retryable=True,
            details={"running": self.running, "waiting": self.waiting},
        )

    def full(self) -> bool:
        return self.admitted >= self.running + self.waiting

    async def __aenter__(self) -> None:
        if self._sem is None:
            self._sem = anyio.Semaphore(self.running)
        self.admitted += 1
        try:
            await self._sem.acquire()
        except BaseException:
            self.admitted -= 1
            raise

    async def __aexit__(self, *exc: object) -> None:
        assert self._sem is not None
        self._sem.release()
        self.admitted -= 1
