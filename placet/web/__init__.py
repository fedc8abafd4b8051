"""`placet web`: the review page for a phone or another browser (docs/design.md sections
11 and 12).

A Starlette app (`placet.web.app.create_app`), server-rendered HTML (`pages`, `html`),
one static script for the WebAuthn calls and one stylesheet (`static/`), and the passkey
ceremonies verified server-side with py_webauthn (`ceremonies`). It decides through the
same core as `placet review` and `placet accept`. `serve` runs it under uvicorn.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import uvicorn

from placet.config import Settings
from placet.store import Store
from placet.web.app import Runs, WebConfig, bind_listener, check_listen, create_app
from placet.web.connections import calm_accept_errors, guarded_h11

__all__ = ["Runs", "WebConfig", "bind_listener", "check_listen", "create_app", "serve"]


def serve(
    store: Store,
    settings: Settings,
    config: WebConfig,
    *,
    cert: Path | None = None,
    key: Path | None = None,
    listener: socket.socket | None = None,
) -> None:
    """Serve the page until interrupted (Ctrl-C / SIGTERM) on `listener` (a socket from
    `bind_listener`; bound here when None). Refuses a non-loopback address without TLS
    (`check_listen`) and a port in use (``port_in_use``). Executions still running when it stops are
    told to stop and waited for briefly; their threads are daemons and die with the
    process."""
    check_listen(config.host, tls=cert is not None)
    listener = listener if listener is not None else bind_listener(config.host, config.port)
    runs = Runs(store, settings)
    app = create_app(store, settings, config, runs=runs)
    server = _Server(
        app.state.changes.release,
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            ssl_certfile=str(cert) if cert else None,
            ssl_keyfile=str(key) if key else None,
            log_level="warning",
            access_log=False,
            server_header=False,
            # no proxy sits in front: a local process must not choose the client address
            # an approval's audit detail records through X-Forwarded-For
            proxy_headers=False,
            # a backstop: the open long-polls are released by `changes.release` first
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
            # a whole request within a deadline, connections capped below the
            # descriptor limit (`placet.web.connections`)
            http=guarded_h11(),
        ),
    )
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again against the
    # handler found before it started: make that an orderly exit (status 0), so the
    # executions are told to stop and the store is closed.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_quietly) if main else None
    try:
        server.run(sockets=[listener])
    finally:
        listener.close()
        runs.stop()
        if main:
            signal.signal(signal.SIGTERM, previous)


GRACEFUL_SECONDS = 5
"""Longest uvicorn waits for open requests after SIGINT/SIGTERM before cancelling them."""


class _Server(uvicorn.Server):
    """uvicorn's server that first releases the queue page's long-polls when a signal
    asks it to stop (`QueueChanges.release`): uvicorn's graceful shutdown waits for every
    open request, and an open page holds one."""

    def __init__(self, closing: Callable[[], None], config: uvicorn.Config) -> None:
        super().__init__(config)
        self._closing = closing

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._closing()
        super().handle_exit(sig, frame)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        calm_accept_errors(asyncio.get_running_loop())
        await super().serve(sockets)


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
