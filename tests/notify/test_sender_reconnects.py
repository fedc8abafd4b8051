"""The notification sender across a PostgreSQL restart (placet.store.reconnect): it says
the connection was lost, LISTENs again once the server is back (it does not fall back to
polling for the rest of its life) and sends what is proposed afterwards."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.notify import channels as ch
from placet.notify.sender import Sender
from placet.store import open_store
from tests.support.notify import Listener, notify_toml
from tests.support.postgres import PgServer, listening, restart_pg_server

pytestmark = pytest.mark.usefixtures("store_backend")


def _until(what: str, done: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
@pytest.mark.timeout(90)
def test_the_sender_listens_again_after_a_restart_and_sends_what_comes_next(
    store_backend: str,
    listener: Listener,
    placet_home: Path,
    pg_server: PgServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener, quiet=0.1, window=0.5))
    settings = load_settings()
    url = settings.database
    assert url is not None
    hook = settings.notify.webhook
    assert hook is not None
    caplog.set_level(logging.WARNING, logger="placet.notify")
    with open_store(settings) as store, open_store(settings) as other:
        sender = Sender(settings, store, channels={"webhook": ch.Webhook(hook.url, "s3cret")})
        sender.start()
        try:
            _until("the sender listens", lambda: len(listening(pg_server, url)) == 1)
            restart_pg_server(pg_server)
            _until("the sender listens again", lambda: len(listening(pg_server, url)) == 1)
            rec, _ = other.create_proposal(
                kind="mkdir",
                request={"kind": "mkdir", "remote_parent": "", "name": "after-restart"},
                evidence={"remote": {"exists": False}},
                reason="make a folder",
                drive_spec="local:/tmp/x",
                run_id="run-after",
                ttl_seconds=1800,
            )
            assert listener.wait_for(lambda: len(listener.on("/hook")) == 1)
            assert [p["id"] for p in listener.on("/hook")[0].json()["proposals"]] == [rec.id]
        finally:
            sender.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "placet.notify"]
    lost = [
        n for n, m in enumerate(said) if m.startswith("notify sender: database connection lost")
    ]
    back = [n for n, m in enumerate(said) if m == "notify sender: reconnected; rescanning"]
    assert lost and back and lost[0] < back[0], said
