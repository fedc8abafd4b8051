"""The stdio transport of `placet serve`, with a stdin read that a signal can interrupt.

The SDK's `stdio_server()` reads stdin line by line in a worker thread (`anyio.wrap_file`).
A thread blocked in `read()` cannot be cancelled, so on SIGTERM the server would hang
until the host wrote another byte or closed the pipe. Hosts send SIGTERM and then wait, so
placet must exit on its own: `StdinLines` waits for stdin with the event loop
(`anyio.wait_readable`, cancellable) and reads only what is ready. stdout stays the SDK's
(it claims fd 1 and points it at stderr while serving, so stray output from a child
cannot corrupt the frame stream).

Like the SDK, `claimed_stdin` moves the real stdin to a private close-on-exec descriptor
and points fd 0 at /dev/null while serving, so a child (rclone) never inherits the MCP
pipe. `serve_stdio` drives the low-level server directly (the SDK's own
`MCPServer.run_stdio_async` does the same with its default streams); it reaches
`MCPServer._lowlevel_server`, which mcp 2.3 documents as the object `Client(...,
mode="legacy")` wraps; the `mcp>=2.3,<3` pin keeps that stable and
`tests/test_server_cli.py` checks the behaviour. Between the transport and the server sit
the streams of `placet.server.flow`, which bound the requests one client keeps in flight.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from typing import Any, cast

import anyio
from mcp.server.stdio import stdio_server

from placet.server.flow import GatedReadStream, GatedWriteStream, RequestGate
from placet.server.framework import PlacetMCP

READ_CHUNK = 64 * 1024


class StdinLines:
    """Async iterator of the UTF-8 lines of descriptor `fd`, each ending in a newline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""
        self.eof = False
        # epoll refuses regular files and /dev/null; those never block, so a thread is fine.
        mode = os.fstat(fd).st_mode
        self.pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)

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

    async def __anext__(self) -> str:
        while b"\n" not in self.buf:
            if self.eof:
                break
            chunk = await self._read()
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
        if not self.buf:
            raise StopAsyncIteration
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", errors="replace") + "\n"


@contextlib.contextmanager
def claimed_stdin() -> Iterator[int]:
    """Yield a private duplicate of fd 0 while fd 0 points at /dev/null; restore after."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(saved, 0)
        for fd in (saved, private):
            with contextlib.suppress(OSError):
                os.close(fd)


async def serve_stdio(server: PlacetMCP) -> None:
    """Serve `server` on stdin/stdout until stdin reaches EOF (or the task is cancelled)."""
    with claimed_stdin() as fd:
        stdin = cast(Any, StdinLines(fd))  # duck-types the `async for line in stdin` it needs
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            gate = RequestGate()
            low = server._lowlevel_server
            await low.run(
                cast(Any, GatedReadStream(read_stream, gate)),
                cast(Any, GatedWriteStream(write_stream, gate)),
                low.create_initialization_options(),
            )
