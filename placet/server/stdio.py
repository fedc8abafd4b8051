"""The stdio transport of `placet serve`, with a stdin read that a signal can interrupt.

The SDK reads stdin in a worker thread no cancellation reaches, so a SIGTERM would wait
for the host's next byte. `StdinLines` waits with the event loop (`anyio.wait_readable`)
and reads only what is ready; `claimed_stdin` moves stdin to a private descriptor and
points fd 0 at /dev/null, and `StdoutFrames` writes frames on a private descriptor while
fd 1 points at stderr, so no child inherits the MCP pipes. A line is at most
`MAX_LINE_BYTES` (16 MiB: `propose_sync` deciding every conflict of a full plan), scanned
once; a longer or too deeply nested one is refused, never cut. When the client is gone
(EPIPE) or stops reading (`WRITE_STALL_SECONDS`, `CLOSING_STALL_SECONDS`), serving ends
with status 0 (docs/decisions/0016-stdio-limits.md). `serve_stdio` drives
`MCPServer._lowlevel_server`, stable under the `mcp>=2.3,<3` pin
(tests/server/test_serve_process.py); between transport and server sit
`placet.server.wire` and `placet.server.flow`."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import stat
from collections.abc import Callable, Iterator
from typing import Any, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.types import INVALID_REQUEST, ErrorData

from placet.server.flow import GatedReadStream, GatedWriteStream, RequestGate
from placet.server.framework import PlacetMCP
from placet.server.wire import (
    LineLog,
    Refused,
    ScreenedReadStream,
    recover_id,
    too_deep,
    too_deep_error,
)

log = logging.getLogger("placet.server")

READ_CHUNK = 64 * 1024
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest stdin line (one JSON-RPC message, newline excluded) placet reads; longer
ones are discarded unbuffered and refused (module docstring)."""
ID_PREFIX_BYTES = 4096
"""How much of an oversized line is kept to recover its id (`wire.recover_id`)."""
WRITE_STALL_SECONDS = 60.0
"""How long a write to stdout may make no progress while stdin is open before placet
takes the client for gone (a live host reads its stdout continuously)."""
CLOSING_STALL_SECONDS = 5.0
"""The same bound once the client closed stdin (`StdinLines.hung_up`): it said goodbye."""


def _too_long(request_id: int | str | None) -> Refused:
    return Refused(
        request_id,
        ErrorData(
            code=INVALID_REQUEST,
            message=(
                f"Invalid Request: the message is longer than placet's limit of "
                f"{MAX_LINE_BYTES} bytes per line and was discarded unread; send a "
                "smaller request"
            ),
            data={"code": "limit_exceeded", "limit_bytes": MAX_LINE_BYTES},
        ),
    )


class StdinLines:
    """Async iterator of the UTF-8 lines of descriptor `fd`, each ending in a newline.

    Each read is scanned for a newline once (from `scanned` on), so a line costs time
    linear in its length. A line over `max_line` bytes is dropped as it arrives (only
    its first `ID_PREFIX_BYTES` are kept) and yielded as an empty line whose `LineLog`
    entry is a `Refused`; blank lines are skipped. Every yielded line is logged in
    `lines` for the screen (`placet.server.wire`).
    """

    def __init__(
        self, fd: int, lines: LineLog | None = None, max_line: int = MAX_LINE_BYTES
    ) -> None:
        self.fd = fd
        self.lines = lines if lines is not None else LineLog()
        self.max_line = max_line
        self.buf = bytearray()
        self.scanned = 0  # buf[:scanned] holds no newline
        self.dropping: bytes | None = None  # the head of an oversized line being dropped
        self.eof = False
        # epoll refuses regular files and /dev/null; those never block, so a thread is fine.
        mode = os.fstat(fd).st_mode
        self.pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)

    def hung_up(self) -> bool:
        """Whether the client has closed its end of stdin: EOF was read, or (unread lines
        still waiting, e.g. held back by `flow.RequestGate`) the pipe reports a hang-up."""
        if self.eof:
            return True
        if not self.pollable:
            return False
        watch = select.poll()
        hangup = select.POLLHUP | getattr(select, "POLLRDHUP", 0)
        watch.register(self.fd, select.POLLIN | hangup)
        return any(events & hangup for _, events in watch.poll(0))

    def __aiter__(self) -> StdinLines:
        return self

    async def _read(self) -> bytes:
        if self.pollable:
            try:
                await anyio.wait_readable(self.fd)
            except (OSError, ValueError):  # e.g. /dev/null: not pollable after all
                self.pollable = False
            else:
                return os.read(self.fd, READ_CHUNK)
        return await anyio.to_thread.run_sync(os.read, self.fd, READ_CHUNK)

    def _take(self) -> bytes | Refused | None:
        """The next complete line in the buffer (or its refusal); None: read more."""
        end = self.buf.find(b"\n", self.scanned)
        if end < 0:
            if self.eof and self.buf:
                end = len(self.buf)
            else:
                self.scanned = len(self.buf)
                if self.scanned > self.max_line:  # start dropping this line
                    self.dropping = bytes(self.buf[:ID_PREFIX_BYTES])
                    self.buf.clear()
                    self.scanned = 0
                return None
        line = bytes(self.buf[:end]) if end <= self.max_line else None
        head = bytes(self.buf[:ID_PREFIX_BYTES])
        del self.buf[: end + 1]
        self.scanned = 0
        if line is None:
            return _too_long(recover_id(head))
        if too_deep(line):
            return too_deep_error(recover_id(head))
        return line

    def _drop(self, chunk: bytes) -> Refused | None:
        """Discard `chunk` up to the end of the line being dropped."""
        assert self.dropping is not None
        end = chunk.find(b"\n")
        if end < 0 and not self.eof:
            return None
        refused = _too_long(recover_id(self.dropping))
        self.dropping = None
        if end >= 0:
            self.buf += chunk[end + 1 :]
        return refused

    async def __anext__(self) -> str:
        while True:
            got = None if self.dropping is not None else self._take()
            if got is None:
                if self.eof and self.dropping is None:
                    raise StopAsyncIteration
                chunk = b"" if self.eof else await self._read()
                if not chunk:
                    self.eof = True
                if self.dropping is not None:
                    got = self._drop(chunk)
                else:
                    self.buf += chunk
                if got is None:
                    continue
            if isinstance(got, Refused):
                log.warning("refused a stdin line: %s", got.error.message)
                self.lines.entries.append(got)
                return "\n"
            if not got.strip():
                continue
            text = got.decode("utf-8", errors="replace")
            self.lines.entries.append(text)
            return text + "\n"


class StdoutFrames:
    """The transport's stdout: async `write`/`flush` of frames to descriptor `fd`.

    A pipe or socket is made non-blocking and waited on with the event loop, so a write
    can be cancelled and is bounded: no progress for `WRITE_STALL_SECONDS`
    (`CLOSING_STALL_SECONDS` once the client closed `stdin`), or any write error (EPIPE: the
    reader is gone), marks the client `gone` and calls `on_gone` once; later frames are
    dropped. Other descriptors (a file, /dev/null, a terminal) are written blocking.
    """

    def __init__(self, fd: int, stdin: StdinLines, on_gone: Callable[[], None]) -> None:
        self.fd = fd
        self.stdin = stdin
        self.on_gone = on_gone
        self.gone = False
        mode = os.fstat(fd).st_mode
        self.pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        if self.pollable:
            os.set_blocking(fd, False)

    def _give_up(self, why: str) -> None:
        self.gone = True
        log.warning("the client is gone (%s); stopping", why)
        self.on_gone()

    async def write(self, text: str) -> None:
        if self.gone:
            return
        data = memoryview(text.encode("utf-8"))
        stalled_since: float | None = None
        while data:
            try:
                written = os.write(self.fd, data)
            except BlockingIOError:
                written = 0
            except OSError as e:
                self._give_up(f"stdout: {e.strerror or e}")
                return
            if written:
                data, stalled_since = data[written:], None
                continue
            now = anyio.current_time()
            stalled_since = now if stalled_since is None else stalled_since
            limit = CLOSING_STALL_SECONDS if self.stdin.hung_up() else WRITE_STALL_SECONDS
            if now - stalled_since >= limit:
                self._give_up(f"it read nothing of stdout for {limit:.0f} s")
                return
            with anyio.move_on_after(min(0.5, limit - (now - stalled_since))):
                await anyio.wait_writable(self.fd)

    async def flush(self) -> None:
        """Frames are written unbuffered; nothing to flush."""


@contextlib.contextmanager
def _claimed(fd: int, stand_in: Callable[[], int]) -> Iterator[int]:
    """Yield a private duplicate of `fd` while `fd` points at the file `stand_in()`
    opens (closed here once `fd` holds it); restore `fd` after."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    saved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    replacement = stand_in()
    try:
        os.dup2(replacement, fd)
    finally:
        os.close(replacement)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(saved, fd)
        for own in (saved, private):
            with contextlib.suppress(OSError):
                os.close(own)


def _stderr_or_null() -> int:
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


@contextlib.contextmanager
def claimed_stdout() -> Iterator[int]:
    """Yield a private duplicate of fd 1 while fd 1 points at stderr (so a child's stray
    output cannot corrupt the frames); restore fd 1, and its blocking mode, after."""
    with _claimed(1, _stderr_or_null) as private:
        blocking = os.get_blocking(private)
        try:
            yield private
        finally:
            with contextlib.suppress(OSError):
                os.set_blocking(private, blocking)


@contextlib.contextmanager
def claimed_stdin() -> Iterator[int]:
    """Yield a private duplicate of fd 0 while fd 0 points at /dev/null; restore after."""
    with _claimed(0, lambda: os.open(os.devnull, os.O_RDONLY)) as private:
        yield private


async def serve_stdio(server: PlacetMCP) -> None:
    """Serve `server` on stdin/stdout until stdin reaches EOF, the client is gone
    (`StdoutFrames`), or the task is cancelled."""
    with claimed_stdin() as fd_in, claimed_stdout() as fd_out, anyio.CancelScope() as scope:
        lines = LineLog()
        reader = StdinLines(fd_in, lines)
        writer = StdoutFrames(fd_out, reader, scope.cancel)
        # duck-typed: `async for line in stdin`, `await stdout.write(...)` / `.flush()`
        async with stdio_server(stdin=cast(Any, reader), stdout=cast(Any, writer)) as (
            read_stream,
            write_stream,
        ):
            gate = RequestGate()
            low = server._lowlevel_server
            screened = ScreenedReadStream(read_stream, lines, write_stream)
            await low.run(
                cast(Any, GatedReadStream(screened, gate)),
                cast(Any, GatedWriteStream(write_stream, gate)),
                low.create_initialization_options(),
            )
