"""The web session is scoped to placet's origin (`placet.web.session`, docs/security.md,
"The session is scoped to placet's origin"): a server on another localhost port, given
everything Chromium sends it while the owner is signed in (cookies, headers, bodies),
learns nothing that reads a proposal's page or the audit, or changes anything, even
replayed with placet's own Origin and Referer; and two `placet web` on two ports keep
their sessions apart (cookies ignore ports, so one sign-in used to replace the other)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from placet.store import Store, open_store
from tests.support.review import add_upload
from tests.support.web import Served, Tab, browser, pair, serve, session_token, tab, visit

__all__ = ["browser", "tab"]

RECORDER_PAGE = b"""<!doctype html><title>dev server</title><img src="/pixel.png">
<script>fetch("/fetched", {method: "POST", credentials: "include", body: "x"});</script>"""


@dataclass(frozen=True)
class Sent:
    """One request as the other server received it."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes


class Recorder:
    """An HTTP server on another 127.0.0.1 port (an agent's dev server, say) that keeps
    every request the browser sends it, whole."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.cond = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _keep(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with recorder.cond:
                    recorder.sent.append(
                        Sent(self.command, self.path, list(self.headers.items()), body)
                    )
                    recorder.cond.notify_all()
                page = RECORDER_PAGE if self.path.startswith("/from-") else b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            do_GET = do_POST = _keep

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self) -> list[str]:
        with self.cond:
            return [s.path for s in self.sent]

    def wait_for(self, path: str) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: any(s.path == path for s in self.sent), 15), (
                f"the browser never asked {path}; asked {[s.path for s in self.sent]}"
            )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


def _replay(
    served: Served, sent: Sent, method: str, path: str, body: bytes | None, kind: str
) -> tuple[int, str]:
    """`sent`'s headers (its cookies among them) on a request to placet, with placet's
    own Origin and Referer forged in."""
    skip = {"host", "content-length", "connection", "origin", "referer", "content-type"}
    req = urllib.request.Request(served.url(path), data=body, method=method)
    for name, value in sent.headers:
        if name.lower() not in skip:
            req.add_header(name, value)
    req.add_header("Origin", served.origin)
    req.add_header("Referer", served.url("/"))
    if body is not None:
        req.add_header("Content-Type", kind)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.timeout(120)
def test_a_server_on_another_port_learns_nothing_that_reads_or_changes(
    tab: Tab, quiet_store: Store, served: Served, recorder: Recorder
) -> None:
    rec = add_upload(quiet_store, reason="the owner's private plans", now=served.clock())
    before = quiet_store.audit_events(proposal_id=rec.id)
    pair(tab, served)
    visit(tab, served.url(f"/p/{rec.id}"))
    assert tab.page.locator("#request-hash").inner_text() == rec.request_hash  # signed in
    token = session_token(tab)

    # The signed-in page navigates to the other port (a link the owner follows), whose
    # page loads an image and POSTs with credentials; the owner also opens it directly.
    other = f"http://localhost:{recorder.port}"
    with tab.page.expect_navigation(url=f"{other}/from-placet"):  # until it has loaded
        tab.page.evaluate(f"location.assign('{other}/from-placet')")
    recorder.wait_for("/fetched")
    tab.page.goto(f"{other}/from-address-bar")
    recorder.wait_for("/pixel.png")
    sent = list(recorder.sent)
    assert len(sent) >= 4, recorder.paths()
    for s in sent:
        seen = " ".join(f"{k}: {v}" for k, v in s.headers) + s.path + s.body.decode("latin-1")
        assert token is None or token not in seen, f"the session reached the other port: {s.path}"

    form, shown = b"reason=gone", b'{"request_hash": "%s"}' % rec.request_hash.encode()
    for s in sent:
        for method, path, body, kind in (
            ("GET", f"/p/{rec.id}", None, ""),
            ("GET", "/audit", None, ""),
            ("GET", "/history", None, ""),
            ("GET", f"/p/{rec.id}/status", None, ""),
            ("GET", "/changes?v=x", None, ""),
            ("POST", f"/p/{rec.id}/discard", form, "application/x-www-form-urlencoded"),
            ("POST", f"/p/{rec.id}/extend", b"", "application/x-www-form-urlencoded"),
            ("POST", f"/p/{rec.id}/challenge", shown, "application/json"),
            ("POST", "/signout", b"", "application/x-www-form-urlencoded"),
        ):  # fmt: skip
            status, text = _replay(served, s, method, path, body, kind)
            assert status in (401, 403), (s.path, method, path, status, text[:300])
            assert "not_signed_in" in text, (path, text[:300])
            assert rec.request_hash not in text and "private plans" not in text, path
    assert quiet_store.get(rec.id).status == "pending"
    assert quiet_store.get(rec.id).expires_at == rec.expires_at
    assert quiet_store.audit_events(proposal_id=rec.id) == before

    # the owner's own page still works with its session
    visit(tab, served.url(f"/p/{rec.id}"))
    assert tab.page.locator("#request-hash").inner_text() == rec.request_hash


def _second_store(store: Store, tmp_path: Path) -> Store:
    """Another placet's store (its own database and data folder), with the same owner's
    config and pins."""
    data = tmp_path / "second"
    return open_store(
        store.settings.model_copy(update={"data_dir": data, "db_path": data / "b.db"})
    )


@pytest.mark.timeout(120)
def test_two_pages_on_two_ports_stay_signed_in_apart(
    tab: Tab, quiet_store: Store, tmp_path: Path
) -> None:
    with (
        _second_store(quiet_store, tmp_path) as store_b,
        serve(quiet_store, quiet_store.settings) as a,
        serve(store_b, store_b.settings) as b,
    ):
        pair(tab, a)
        pair(tab, b)  # B's sign-in: A's session must stay
        visit(tab, a.url("/"))
        assert tab.page.locator("h1").inner_text().startswith("Queue")
        visit(tab, b.url("/"))
        assert tab.page.locator("h1").inner_text().startswith("Queue")

        tab.page.click("button:has-text('Sign out')")  # out of B only
        tab.page.wait_for_selector("#signin")
        assert tab.page.evaluate("localStorage.getItem('placet_session')") is None
        visit(tab, a.url("/audit"))
        assert tab.page.locator("h1").inner_text().startswith("Audit")
