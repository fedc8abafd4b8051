"""Notification channels against misbehaving receivers, real listeners on
127.0.0.1: a receiver that answers something other than HTTP, and one that drips its
answer a byte at a time so that no single read ever times out. A send must end within
its timeout and the delivery be recorded as an attempt that failed, so a channel's
thread is never held by one receiver for longer than that."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.notify import channels as ch
from placet.notify.sender import Sender
from placet.store import Store, open_store
from placet.store.db import dt_text
from placet.store.outbox import Outbox
from tests.support.notify import Listener, RawListener, notify_toml

T0 = datetime(2031, 3, 4, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def ntfy_store(placet_home: Path, listener: Listener) -> Iterator[Store]:
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener, webhook=False))
    s = open_store(load_settings())
    yield s
    s.close()


def _propose(ntfy_store: Store, at: datetime) -> int:
    rec, _ = ntfy_store.create_proposal(
        kind="mkdir",
        request={"kind": "mkdir", "remote_parent": "", "name": "x"},
        evidence={"remote": {"exists": False}},
        reason="make a folder",
        drive_spec="local:/tmp/x",
        run_id="run-a",
        ttl_seconds=1800,
        now=at,
    )
    return rec.id


def test_a_receiver_answering_not_http_is_a_failed_attempt(ntfy_store: Store) -> None:
    """Before: http.client's BadStatusLine escaped `post` (not an OSError), the sender
    logged a traceback and the delivery stayed claimed, with no attempt recorded."""
    raw = RawListener("garbage")
    try:
        with pytest.raises(ch.DeliveryFailed) as e:
            ch.post(raw.url("/topic"), b"{}", {})
        assert e.value.retryable
        now = [T0]
        n = ntfy_store.settings.notify.ntfy
        assert n is not None
        ntfy = ch.Ntfy(raw.url("/topic"), 3, None, None)
        sender = Sender(
            ntfy_store.settings, ntfy_store, channels={"ntfy": ntfy}, clock=lambda: now[0]
        )
        _propose(ntfy_store, T0)
        now[0] = T0 + timedelta(seconds=1)
        sender.tick()
        (row,) = Outbox(ntfy_store.engine).log()
        assert row.attempts == 1 and row.state != "sending", row
        assert "127.0.0.1" in (row.last_error or "")
    finally:
        raw.close()


def test_a_receiver_that_drips_its_answer_is_cut_off_at_the_timeout(ntfy_store: Store) -> None:
    """Before: the timeout bounded each read only, so a receiver sending a byte every
    50 ms held the send (and every channel of the process behind it) for as long as it
    liked."""
    raw = RawListener("drip")
    try:
        with pytest.raises(ch.DeliveryFailed) as e:
            ch.post(raw.url("/topic"), b"{}", {}, timeout=0.5)
        assert e.value.retryable and "timed out" in e.value.message
        assert raw.done.wait(30) and raw.cut_off.is_set()  # placet hung up, not the receiver
    finally:
        raw.close()


def test_placet_serve_exits_on_stdin_close_while_a_send_hangs(
    placet_home: Path, tmp_path: Path
) -> None:
    """Before: closing `placet serve`'s stdin while its sender waited on a receiver that
    never answered kept the process alive until the send's own timeout (`TIMEOUT_S`,
    10 s; measured 6.5 s after a close 3.5 s into the send). Now stopping the sender
    cuts the send off; the attempt is recorded as failed (retried by the next placet
    process), and the process exits well inside that timeout."""
    import os
    import subprocess
    import sys

    raw = RawListener("drip")
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(
        "[notify]\nburst_quiet_s = 0.1\nburst_window_s = 0.5\n"
        f'[notify.ntfy]\nurl = "{raw.url("/topic")}"\n'
    )
    root, drive = tmp_path / "root", tmp_path / "drive"
    root.mkdir()
    drive.mkdir()
    env = {**os.environ, "PLACET_HOME": str(placet_home), "PLACET_DRIVE": str(drive)}
    placet = str(Path(sys.executable).parent / "placet")
    proc = subprocess.Popen(
        [placet, "serve", "--root", str(root)], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        with open_store(load_settings()) as ntfy_store:
            _propose(ntfy_store, datetime.now(UTC))
        assert raw.connected.wait(60), "placet serve never sent"
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=ch.TIMEOUT_S - 2) == 0
        assert raw.done.wait(30) and raw.cut_off.is_set()
        with open_store(load_settings()) as ntfy_store:
            (row,) = Outbox(ntfy_store.engine).log()
        assert row.attempts == 1 and row.state != "sent", row
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raw.close()


def test_a_sender_never_sends_a_delivery_whose_claim_has_lapsed(ntfy_store: Store) -> None:
    """A sender claimed up to 8 deliveries at once for `CLAIM_S` (60 s) and sent them
    one after another, each allowed `TIMEOUT_S` (10 s): behind a slow receiver the last
    claims lapsed before their turn, another placet process (a second `placet serve`)
    could claim and send them, and then this one sent them again, a repeat the outbox
    documents only for a process that died. The receiver here takes the whole timeout
    on each request (the injected clock moves on by `TIMEOUT_S` per request) and checks,
    on each, that no claim of this sender has lapsed."""
    import sqlite3
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    now = [T0]
    lapsed: list[int] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            now[0] += timedelta(seconds=ch.TIMEOUT_S)  # this answer took the whole timeout
            con = sqlite3.connect(ntfy_store.db_path)
            try:
                lapsed.extend(
                    r[0]
                    for r in con.execute(
                        "SELECT id FROM notify_delivery WHERE state = 'sending' "
                        "AND claim_until <= ?",
                        (dt_text(now[0]),),
                    )
                )
            finally:
                con.close()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/topic"
        sender = Sender(
            ntfy_store.settings, ntfy_store, channels={"ntfy": ch.Ntfy(url, 3, None, None)},
            clock=lambda: now[0],
        )  # fmt: skip
        for run in range(9):  # nine sessions: nine messages due at once
            ntfy_store.create_proposal(
                kind="mkdir", request={"kind": "mkdir", "remote_parent": "", "name": f"d{run}"},
                evidence={"remote": {"exists": False}}, reason="r", drive_spec="local:/tmp/x",
                run_id=f"run-{run}", ttl_seconds=1800, now=T0,
            )  # fmt: skip
        now[0] = T0 + timedelta(seconds=5)
        sender.tick()
        assert lapsed == [], f"deliveries {lapsed} were still claimed after their claim lapsed"
        assert all(d.state == "sent" for d in Outbox(ntfy_store.engine).log())
    finally:
        server.shutdown()
        server.server_close()
