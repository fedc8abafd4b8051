"""Helpers for the `placet web` tests (imported directly, not a conftest).

The page is served for real: uvicorn on 127.0.0.1 and a free port, in a daemon thread of
the test process (so the test injects the app's clock), stopped when the test ends. The
browser is Debian's Chromium driven by Playwright (`executable_path`, ``--no-sandbox``
since the tests run as root), one per module; each test gets a fresh context and page
with a virtual authenticator (user verification on) over the DevTools protocol.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from placet.config import Settings
from placet.store import Store
from placet.store.passkeys import open_pairing_link
from placet.web import WebConfig, create_app
from placet.web.changes import QueueChanges
from placet.web.connections import guarded_h11
from placet.web.runs import Runs
from placet.web.session import SESSION_HEADER

CHROMIUM = Path("/usr/bin/chromium")


@dataclass
class Clock:
    """A settable clock starting at the real time (the executor's own times are real)."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now = self.now + timedelta(**delta)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """A running `placet web` app: its origin, config, clock, store, executions and the
    queue page's change counter (`QueueChanges`)."""

    origin: str
    config: WebConfig
    clock: Clock
    store: Store
    settings: Settings
    runs: Runs
    changes: QueueChanges

    def url(self, path: str) -> str:
        return self.origin + path

    def post(
        self, path: str, body: dict[str, Any] | None = None, *, origin: str | None = "",
        session: str | None = None, timeout: float = 10,
    ) -> tuple[int, str]:  # fmt: skip
        """POST JSON from outside the browser; `origin` "" sends this server's own,
        `session` a session token in the header placet's script sends it in."""
        req = urllib.request.Request(
            self.url(path), data=json.dumps(body or {}).encode(), method="POST"
        )
        req.add_header("Content-Type", "application/json")
        if origin is not None:
            req.add_header("Origin", origin or self.origin)
        if session:
            req.add_header(SESSION_HEADER, session)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


@contextlib.contextmanager
def serve(
    store: Store, settings: Settings, clock: Clock | None = None, *, cap: int | None = None
) -> Iterator[Served]:
    """`placet web` in a thread of the test; `cap` its connection cap (default: as the
    process's descriptor limit gives, `placet.web.connections.connection_cap`)."""
    clock = clock or Clock()
    config = WebConfig(port=free_port())
    runs = Runs(store, settings)
    app = create_app(store, settings, config, clock=clock, runs=runs)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=config.port, log_level="warning", http=guarded_h11(cap=cap)
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "placet web did not start"
        time.sleep(0.01)
    try:
        yield Served(config.origin, config, clock, store, settings, runs, app.state.changes)
    finally:
        app.state.changes.release()  # as `placet web`'s signal handler: open pages let go
        server.should_exit = True
        thread.join(10)
        runs.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@dataclass
class Tab:
    """A browser page with a virtual authenticator (`authenticator_id`)."""

    page: Any
    cdp: Any
    authenticator_id: str

    def credentials(self) -> list[dict[str, Any]]:
        got = self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.authenticator_id})
        return list(got["credentials"])


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(15_000)
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    added = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    yield Tab(page, cdp, added["authenticatorId"])
    context.close()


def pair(tab: Tab, served: Served) -> None:
    """Register the tab's passkey through a fresh pairing link (signs the tab in)."""
    token = open_pairing_link(served.store, now=served.clock())
    tab.page.goto(served.url(f"/pair/{token}"))
    tab.page.click("#pair")
    tab.page.wait_for_url(served.url("/"))
    shown(tab)


def shown(tab: Tab) -> None:
    """Wait until the page a navigation asked for is shown: placet answers the sign-in
    page (``#shell``) to a navigation, which carries no session, and its script then
    reads the page with the session it keeps (`placet.web.session`)."""
    tab.page.wait_for_selector("#shell", state="detached")


def visit(tab: Tab, url: str) -> None:
    """Open `url` in the signed-in tab and wait until the page itself is shown."""
    tab.page.goto(url)
    shown(tab)


def session_token(tab: Tab) -> str | None:
    """The session placet's script keeps for the page the tab shows (its localStorage)."""
    token = tab.page.evaluate("localStorage.getItem('placet_session')")
    return None if token is None else str(token)


def get(url: str, session: str | None, timeout: float = 10) -> tuple[int, str]:
    """GET `url` from outside the browser, with `session` in placet's session header."""
    headers = {SESSION_HEADER: session} if session else {}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def screenshots_dir(tmp_path: Path) -> Path:
    """docs/screenshots/ when PLACET_SCREENSHOTS=1 (to refresh the committed ones), else a
    folder of the test's own (a test run leaves the checkout as it was)."""
    if os.environ.get("PLACET_SCREENSHOTS") != "1":
        return tmp_path
    repo = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
    out = repo / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out
