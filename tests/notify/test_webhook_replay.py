"""A webhook request cannot be replayed to a receiver that follows the README: the
signature covers the attempt's time, the delivery id and the body; the id is random
(never the same in two databases, or in two runs of `placet notify test`) and the same
on every retry of one delivery. The receiver (`tests.support.notify.WebhookReceiver`)
is written from the README's recipe; the requests come from real sends to a real
listener on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.notify import channels as ch
from placet.notify.sender import Sender, backoff
from placet.store import open_store
from tests.support.keyring_backend import file_keyring_env
from tests.support.notify import (
    WINDOW_S,
    Clock,
    Listener,
    Received,
    WebhookReceiver,
    notify_toml,
    propose,
)

SECRET = "replay-secret"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _send_one(home: Path, listener: Listener, name: str) -> None:
    """One proposal in the database of `home`, sent through a webhook to `listener`."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text(notify_toml(listener))
    clock = Clock()
    with open_store(load_settings()) as store:
        webhook = ch.Webhook(listener.url("/hook"), SECRET)
        sender = Sender(store.settings, store, channels={"webhook": webhook}, clock=clock)
        propose(store, name)
        clock.advance(1)
        assert sender.tick() == 1


def test_a_captured_request_replayed_is_refused(placet_home: Path, listener: Listener) -> None:
    _send_one(placet_home, listener, "once")
    (hook,) = listener.on("/hook")
    assert UUID.match(hook.headers["x-placet-delivery"])
    assert hook.json()["delivery"] == hook.headers["x-placet-delivery"]
    receiver = WebhookReceiver(SECRET)
    now = time.time()
    assert receiver.refuse(hook, now) is None
    # The same bytes again: inside the window the id is known, after it the time is old.
    assert receiver.refuse(hook, now + 1) == "seen before"
    assert receiver.refuse(hook, now + WINDOW_S + 60) == "outside the window"
    # A fresh time (or another id) put in by whoever replays it breaks the signature.
    t = re.sub(r"t=\d+", f"t={int(now) + WINDOW_S + 60}", hook.headers["x-placet-signature"])
    moved = Received(hook.path, {**hook.headers, "x-placet-signature": t}, hook.body)
    assert receiver.refuse(moved, now + WINDOW_S + 60) == "bad signature"
    other = Received(hook.path, {**hook.headers, "x-placet-delivery": "another-id"}, hook.body)
    assert WebhookReceiver(SECRET).refuse(other, now) == "bad signature"


def test_delivery_ids_differ_across_databases(
    placet_home: Path, tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each database numbers its deliveries from 1: two placet setups posting to one
    receiver sent the same id, and the receiver dropped the second as a repeat."""
    _send_one(placet_home, listener, "first")
    monkeypatch.setenv("PLACET_HOME", str(tmp_path / "second-home"))
    _send_one(tmp_path / "second-home", listener, "second")
    first, second = listener.on("/hook")
    receiver = WebhookReceiver(SECRET)
    now = time.time()
    assert receiver.refuse(first, now) is None and receiver.refuse(second, now) is None
    assert first.headers["x-placet-delivery"] != second.headers["x-placet-delivery"]


def test_a_retry_resends_the_same_id_signed_anew(placet_home: Path, listener: Listener) -> None:
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener))
    clock = Clock()
    webhook = ch.Webhook(listener.url("/hook"), SECRET)
    with open_store(load_settings()) as store:
        sender = Sender(store.settings, store, channels={"webhook": webhook}, clock=clock)
        propose(store, "retried")
        clock.advance(1)
        listener.status = 503
        assert sender.tick() == 0
        listener.status = 200
        clock.advance(backoff(1, rand=lambda: 1.0))
        assert sender.tick() == 1
    refused, accepted = listener.tried
    assert refused.headers["x-placet-delivery"] == accepted.headers["x-placet-delivery"]
    assert UUID.match(accepted.headers["x-placet-delivery"])
    assert WebhookReceiver(SECRET).refuse(accepted, time.time()) is None


def test_notify_test_sends_a_new_id_each_time(
    tmp_path: Path, placet_home: Path, listener: Listener
) -> None:
    """`placet notify test` sent delivery id 0 every time: a receiver that drops repeats
    dropped every test after the first."""
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener))
    keyring = tmp_path / "keyring.json"
    keyring.write_text(json.dumps({"placet/notify-webhook-secret": SECRET}))
    env = {**os.environ, **file_keyring_env(keyring), "PLACET_HOME": str(placet_home)}
    placet = str(Path(sys.executable).parent / "placet")
    for _ in range(2):
        r = subprocess.run(
            [placet, "notify", "test"], env=env, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stdout + r.stderr
    receiver = WebhookReceiver(SECRET)
    hooks = listener.on("/hook")
    assert [receiver.refuse(h, time.time()) for h in hooks] == [None, None]
