"""Real listeners on 127.0.0.1 standing in for an ntfy server and a webhook receiver.

`Listener` runs `http.server.ThreadingHTTPServer` in a thread and records every POST it
accepts (path, headers, body) in `received`, and every one it was sent in `tried`.
`down()` closes the socket (senders then get "connection refused") and `up()` listens
again on the same port. `wait_for` waits on a condition with a cap, never a fixed sleep.
Use it as a context manager: it stops itself on exit. `RawListener` answers badly or
not at all; `WebhookReceiver` checks a webhook as the README tells a receiver to.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from placet.store import Store

T0 = datetime(2031, 3, 4, 12, 0, 0, tzinfo=UTC)
"""The notification tests' start of time (any fixed instant: the clock is injected)."""


class Clock:
    """A settable clock for `Sender(clock=...)`: tests move time on without sleeping."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Listener:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.tried: list[Received] = []
        self.cond = threading.Condition()
        self.status = 200
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.up()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with listener.cond:
                    status = listener.status
                    listener.tried.append(got)
                    if status == 200:
                        listener.received.append(got)
                    listener.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def up(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def on(self, path: str) -> list[Received]:
        with self.cond:
            return [r for r in self.received if r.path == path]

    def wait_for(self, pred: Callable[[], bool], timeout: float = 30.0) -> bool:
        """Wait until `pred()` holds (checked on every request, and every 0.2 s)."""
        end = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.2))
            return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


class RawListener:
    """A TCP listener on 127.0.0.1 that reads a request and then, by `answer`: sends
    bytes that are not HTTP (``garbage``), drips a header a byte per 50 ms (``drip``),
    or says nothing (``hold``), until `close()`. Records whether the client hung up
    before the answer was over (`cut_off`); `requests` counts requests read."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.cut_off = threading.Event()
        self.connected = threading.Event()
        self.done = threading.Event()
        self.stop = threading.Event()
        self.requests = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            self.requests += 1
            self.connected.set()
            try:
                if self.answer == "hold":  # until the client hangs up, or close()
                    conn.settimeout(0.05)
                    while not self.stop.is_set():
                        with contextlib.suppress(TimeoutError):
                            if not conn.recv(1):
                                self.cut_off.set()
                                return
                elif self.answer == "garbage":
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                else:  # drip a header forever (until stopped), a byte per 50 ms
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                    while not self.stop.wait(0.05):
                        conn.sendall(b"a")
            except OSError:
                self.cut_off.set()
            finally:
                self.done.set()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def wait_until(pred: Callable[[], bool], timeout: float = 30.0, every: float = 0.05) -> bool:
    """Poll `pred` until it holds or `timeout` passes (a cap, not a wait)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every)
    return pred()


def notify_toml(
    listener: Listener,
    *,
    detail: str = "full",
    quiet: float = 0.3,
    window: float = 2.0,
    webhook: bool = True,
) -> str:
    """A `[notify]` table pointing ntfy (topic `placet-topic`) and, when asked, a webhook
    at `listener`."""
    lines = [
        "[notify]",
        f'detail = "{detail}"',
        f"burst_quiet_s = {quiet}",
        f"burst_window_s = {window}",
        "[notify.ntfy]",
        f'url = "{listener.url("/placet-topic")}"',
        "priority = 4",
        'click = "http://127.0.0.1:9/review"',
    ]
    if webhook:
        lines += ["[notify.webhook]", f'url = "{listener.url("/hook")}"']
    return "\n".join(lines) + "\n"


def propose(store: Store, name: str, run: str = "run-a", at: datetime = T0, **kw: Any) -> int:
    """A pending mkdir of `name` by session `run` at `at` (30 min TTL); its id."""
    rec, _ = store.create_proposal(
        kind="mkdir",
        request={"kind": "mkdir", "remote_parent": "", "name": name},
        evidence={"remote": {"exists": False}},
        reason="make a folder",
        drive_spec="local:/tmp/x",
        run_id=run,
        ttl_seconds=1800,
        now=at,
        **kw,
    )
    return rec.id


WINDOW_S = 300
"""The receiver's window the docs recommend: a timestamp at most 5 minutes off."""


class WebhookReceiver:
    """A webhook receiver's check, written from the README's recipe (not from placet's
    code): the signature is HMAC-SHA256 over ``<t>.<delivery>.<body>``; `t` within
    `WINDOW_S` of the receiver's clock; a delivery id accepted before is refused (ids are
    remembered for twice the window)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.seen: dict[str, float] = {}

    def refuse(self, r: Received, now: float) -> str | None:
        """Why `r` is refused at Unix time `now`, or None (then it is remembered)."""
        parts = dict(
            p.split("=", 1) for p in r.headers["x-placet-signature"].split(",") if "=" in p
        )
        delivery = r.headers.get("x-placet-delivery", "")
        if "t" not in parts or "v1" not in parts or not parts["t"].isdigit():
            return "malformed signature header"
        signed = f"{parts['t']}.{delivery}.".encode() + r.body
        want = hmac.new(self.secret, signed, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(parts["v1"], want):
            return "bad signature"
        if abs(now - int(parts["t"])) > WINDOW_S:
            return "outside the window"
        self.seen = {d: at for d, at in self.seen.items() if now - at <= 2 * WINDOW_S}
        if delivery in self.seen:
            return "seen before"
        self.seen[delivery] = now
        return None
