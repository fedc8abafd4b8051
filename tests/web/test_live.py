"""The web page's queue is live: a proposal made or decided on another
host reaches an open queue page without a reload (LISTEN/NOTIFY on PostgreSQL, the data
version on SQLite: `placet.web.changes`), and a real `placet web` process with a long-poll
open stops at once on SIGTERM, its host loop having run what another host approved. On
both backends."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from placet.store import Store, open_store
from placet.web.session import SESSION_HEADER
from tests.support.review import add_mkdir
from tests.support.rig import PLACET, Rig, approve_on_host_b, host_b_settings
from tests.support.web import Served, Tab, browser, free_port, pair, serve, tab

__all__ = ["browser", "tab"]  # fixtures imported for this module

pytestmark = pytest.mark.usefixtures("store_backend")


@pytest.mark.timeout(120)
def test_the_open_queue_shows_another_hosts_proposal_and_its_discard(
    tab: Tab, served: Served, tmp_path: Path
) -> None:
    pair(tab, served)
    page = tab.page
    assert "No proposal is waiting" in page.locator("#live").inner_text()
    page.evaluate("window.stillTheSamePage = true")  # a reload would forget it
    with open_store(host_b_settings(served.settings, tmp_path)) as store_b:
        started = time.monotonic()
        rec = add_mkdir(store_b, name="from-host-b", now=served.clock())
        page.wait_for_selector(f"#live a[href='/p/{rec.id}']", timeout=15_000)
        shown = time.monotonic() - started
        assert "1 pending" in page.locator("h1").inner_text()
        store_b.discard(rec.id, now=served.clock())
        page.wait_for_selector(f"#live a[href='/p/{rec.id}']", state="detached", timeout=15_000)
        assert "No proposal is waiting" in page.locator("#live").inner_text()
    assert page.evaluate("window.stillTheSamePage") is True
    print(f"proposal on the open page {shown:.3f} s after its commit")


def test_the_change_stream_needs_a_session_and_says_nothing(served: Served) -> None:
    req = urllib.request.Request(served.url("/changes?v=x"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=10)
    assert refused.value.code == 403
    assert json.loads(refused.value.read())["code"] == "not_signed_in"


def _session(store: Store) -> str:
    """A signed-in session for a passkey registered straight in the store."""
    token = store.create_pairing()
    key = store.register_passkey(
        token, credential_id="cred-live", public_key=b"\x01" * 77, sign_count=0, name="test"
    )
    return store.open_session(key.id)


def _get(url: str, session: str, timeout: float = 60) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={SESSION_HEADER: session})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def _start_web(port: int) -> subprocess.Popen[str]:
    """A real `placet web --port PORT`, stdout and stderr piped."""
    return subprocess.Popen(
        [str(PLACET), "web", "--port", str(port)],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _live_token(proc: subprocess.Popen[str], origin: str, session: str) -> str:
    """Once `placet web` said its address and answers its queue page (within 20 s): the
    page's change token (`data-changes`)."""
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == f"placet web: {origin}/"
    deadline = time.monotonic() + 20
    while True:
        try:
            status, body = _get(origin + "/", session, timeout=5)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "no answer"
            time.sleep(0.05)
    found = re.search(r'id="live" data-changes="([0-9a-f]+\.\d+)"', body)
    assert status == 200 and found, body[:500]
    return found.group(1)


@pytest.mark.timeout(120)
def test_placet_web_runs_its_host_loop_and_stops_at_once_with_a_long_poll_open(
    configured_rig: Rig, tmp_path: Path
) -> None:
    rig = configured_rig
    session = _session(rig.store)
    rig.write("note.txt", b"run by placet web's host loop\n")
    rec = rig.upload("note.txt")
    port = free_port()
    proc = _start_web(port)
    origin = f"http://localhost:{port}"
    try:
        current = _live_token(proc, origin, session)

        # Host B approves host A's proposal: placet web's host loop (host A) runs it.
        approve_on_host_b(rig, tmp_path, rec, "placet web's host loop")
        assert rig.store.get(rec.id).status == "succeeded"
        assert (rig.remote_dir or Path()).joinpath("note.txt").exists()

        # A long-poll at the current token is held open until SIGTERM lets it go (the
        # run's last commits may still move the token: poll again until one is held).
        answer: dict[str, Any] = {}
        for _ in range(20):
            answer.clear()

            def hold(seen: str = current) -> None:
                answer["reply"] = _get(f"{origin}/changes?v={seen}", session)

            poll = threading.Thread(target=hold, daemon=True)
            poll.start()
            poll.join(1.0)
            if poll.is_alive():
                break  # held: nothing changes any more
            current = json.loads(answer["reply"][1])["v"]
        assert poll.is_alive(), answer
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        took = time.monotonic() - signalled
        poll.join(10)
        status, text = answer["reply"]
        assert status == 200 and json.loads(text) == {"v": current, "closing": True}
        # Released by the signal handler, not by uvicorn's 5 s backstop (that would
        # cancel the request: no answer at all).
        assert took < 10, f"placet web took {took:.1f} s to stop with a long-poll open"
        print(f"placet web stopped {took:.3f} s after SIGTERM with a long-poll open")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _open_polls(served: Served, session: str, token: str, n: int) -> list[socket.socket]:
    """`n` long-polls at `token`, each on its own connection, as `n` open pages hold."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", served.config.port), timeout=10)
        s.sendall(
            f"GET /changes?v={token} HTTP/1.1\r\nHost: {served.config.authority}\r\n"
            f"{SESSION_HEADER}: {session}\r\n\r\n".encode()
        )
        socks.append(s)
    return socks


def _fetch(served: Served, path: str, session: str) -> tuple[int, str]:
    try:
        return _get(served.url(path), session, timeout=10)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _until(done: Any, what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.timeout(60)
def test_closed_tabs_end_their_long_polls_and_200_polls_hold_no_thread(
    quiet_store: Store,
) -> None:
    """200 long-polls from one client are coroutines, not threads: the server answers its
    pages meanwhile; closing the tabs ends their polls at once, not after the 25 s poll."""
    session = _session(quiet_store)  # before the app: its token does not move after
    with serve(quiet_store, quiet_store.settings) as served:
        changes = served.changes
        threads = threading.active_count()
        socks = _open_polls(served, session, changes.token(), 200)
        try:
            _until(lambda: changes.waiting == 200, f"{changes.waiting} of 200 polls held")
            status, body = _fetch(served, "/", session)
            assert status == 200 and "data-changes" in body
            # anyio's worker pool (at most 40 threads) ran their session checks; the
            # polls themselves wait as coroutines
            assert threading.active_count() <= threads + 41
            ready, _, _ = select.select(socks, [], [], 0)
            assert ready == []  # every poll still held: none answered early
        finally:
            closed = time.monotonic()
            for s in socks:
                s.close()
        # A closed tab's poll ends when its connection does (`http.disconnect`).
        _until(lambda: changes.waiting == 0, f"{changes.waiting} polls outlived their tab", 5)
        print(f"200 closed tabs' polls ended {time.monotonic() - closed:.3f} s after the close")


def test_a_forged_or_garbage_token_is_answered_with_the_current_one(quiet_store: Store) -> None:
    session = _session(quiet_store)
    with serve(quiet_store, quiet_store.settings) as served:
        current = served.changes.token()
        for forged in ("x", "0" * 64, "%ff%fe%00", "a" * 5000, f"{current}0", "..", "-1"):
            status, body = _fetch(served, f"/changes?v={forged}", session)
            assert status == 200, (forged[:20], status, body[:200])
            assert json.loads(body) == {"v": current, "closing": False}
        status, body = _fetch(served, "/changes?v=" + "a" * 100_000, session)
        if status == 200:  # httptools reads any length; only 64 characters are compared
            assert json.loads(body) == {"v": current, "closing": False}
        else:  # h11 refuses a request line past 16 KiB
            assert status in (400, 414, 431), status
        assert _fetch(served, "/", session)[0] == 200
        assert served.changes.waiting == 0


@pytest.mark.timeout(120)
def test_placet_web_with_200_long_polls_answers_and_stops_at_once(configured_rig: Rig) -> None:
    """A real `placet web` holding 200 long-polls from one client still answers its pages,
    and SIGTERM ends it promptly: every poll is answered `closing` (or, not yet read by
    the server, its connection closed), none errs."""
    rig = configured_rig
    session = _session(rig.store)
    port = free_port()
    proc = _start_web(port)
    origin = f"http://localhost:{port}"
    socks: list[socket.socket] = []
    try:
        token = _live_token(proc, origin, session)
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            s.sendall(
                f"GET /changes?v={token} HTTP/1.1\r\nHost: localhost:{port}\r\n"
                f"{SESSION_HEADER}: {session}\r\n\r\n".encode()
            )
            socks.append(s)
        started = time.monotonic()
        assert _get(origin + "/", session, timeout=10)[0] == 200
        print(f"the queue page answered in {time.monotonic() - started:.3f} s beside 200 polls")
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        took = time.monotonic() - signalled
        answers = []
        for s in socks:
            data = b""
            while chunk := s.recv(1 << 16):
                data += chunk
            answers.append(data)
        closing = [a for a in answers if a]
        assert closing, "no poll was answered"
        for a in closing:
            head, _, text = a.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), a[:200]
            assert json.loads(text)["closing"] is True
        assert took < 10, f"placet web took {took:.1f} s to stop with 200 long-polls open"
        print(f"stopped {took:.3f} s after SIGTERM; {len(closing)} of 200 polls answered")
    finally:
        for s in socks:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
