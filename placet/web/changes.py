"""The queue page's live updates: one thread waits for the store to change, long-polls
wait for the thread (docs/decisions/0022-live-changes.md).

`QueueChanges` runs one daemon thread per app that sleeps in `Store.change_waiter()` and
counts changes on the event loop. An open queue page holds one `GET /changes?v=TOKEN`
(`wait`), answered when the count moves past its token, after `LONG_POLL_SECONDS`, at
once when the server closes (`release`, called before uvicorn drains), or when its
client disconnects. The token is this app's random epoch and the count: it says "read
again", never what changed, and a page drawn by an earlier server is out of date at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive

from placet.store import Store
from placet.web.endpoints import not_signed_in, refused_json
from placet.web.state import WebState, web_state

log = logging.getLogger(__name__)

LONG_POLL_SECONDS = 25.0
"""Longest a `/changes` request is held open without a change (under common proxies'
and browsers' idle timeouts)."""
RETRY_SECONDS = 1.0
"""How long the thread waits before making its waiter again after the database failed."""
_SLICE = 0.5
"""Longest the thread sleeps in the waiter before looking whether it should stop."""


async def _disconnected(receive: Receive) -> None:
    """Return once the client's connection closed (ASGI ``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class QueueChanges:
    """Counts the store's changes for the queue page's long-polls (module docstring).

    `start(loop)` from the event loop's thread (the app's startup), `close()` from any
    thread, `token()` from any thread, `wait(token)` on the loop.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.epoch = secrets.token_hex(6)
        self.count = 0
        self.waiting = 0
        """Long-polls held open now (`wait` calls not yet returned)."""
        self.closing = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moved = asyncio.Event()
        self._thread: threading.Thread | None = None

    def token(self) -> str:
        """The version a page drawn now shows (read before its store reads)."""
        return f"{self.epoch}.{self.count}"

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._moved = asyncio.Event()
        self._thread = threading.Thread(target=self._watch, name="placet-web-changes", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Answer every waiting long-poll now, and every later one at once; never blocks
        (`placet web` calls it from its signal handler)."""
        self.closing.set()
        self._wake()

    def close(self, timeout: float = 2.0) -> None:
        """`release`, then stop the thread: wait at most `timeout` s (idempotent)."""
        self.release()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    async def wait(
        self, seen: str, timeout: float = LONG_POLL_SECONDS, *, gone: Receive | None = None
    ) -> str | None:
        """The current token once it differs from `seen`, or after `timeout` seconds, or
        at once when closing; None as soon as the client disconnected, when `gone` is the
        request's ASGI `receive` (a closed tab's poll ends with its connection, not 25 s
        later)."""
        if gone is None:
            return await self._wait(seen, timeout)
        waiting = asyncio.ensure_future(self._wait(seen, timeout))
        left = asyncio.ensure_future(_disconnected(gone))
        try:
            await asyncio.wait({waiting, left}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            left.cancel()
        return waiting.result() if waiting.done() and not waiting.cancelled() else None

    async def _wait(self, seen: str, timeout: float) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        self.waiting += 1
        try:
            while self.token() == seen and not self.closing.is_set():
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                moved = self._moved
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(moved.wait(), left)
            return self.token()
        finally:
            self.waiting -= 1

    # -- the thread ---------------------------------------------------------------------

    def _wake(self, bump: bool = False) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(self._moved_now, bump)

    def _moved_now(self, bump: bool) -> None:
        if bump:
            self.count += 1
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    def _watch(self) -> None:
        broken = False
        while not self.closing.is_set():
            try:
                with self.store.change_waiter() as waiter:
                    if broken:  # back: what changed meanwhile was missed
                        self._wake(bump=True)
                        broken = False
                    while not self.closing.is_set():
                        if waiter.wait(_SLICE, self.closing):
                            self._wake(bump=True)
            except Exception:  # StoreError, or the driver's own from a dropped connection
                if not broken:
                    log.warning("waiting for queue changes failed; trying again", exc_info=True)
                broken = True
                self.closing.wait(RETRY_SECONDS)


async def changes_poll(request: Request) -> Response:
    """Held open until the store changes (`QueueChanges.wait`): ``{"v": token,
    "closing": bool}``. Signed-in owners only; the token tells nothing."""
    web = web_state(request)
    if await web.off_loop(WebState.session, request) is None:
        return refused_json(not_signed_in())
    seen = request.query_params.get("v", "")[:64]
    token = await web.changes.wait(seen, gone=request.receive)
    if token is None:  # the page is gone: nobody reads an answer
        return Response(status_code=204)
    return JSONResponse({"v": token, "closing": web.changes.closing.is_set()})


ROUTES = [Route("/changes", changes_poll)]
