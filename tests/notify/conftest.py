"""Fixtures the notification tests share: a real HTTP listener on 127.0.0.1 standing in
for an ntfy server and a webhook receiver (`tests.support.notify.Listener`), and a store
whose `config.toml` points ntfy and the webhook at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from placet.config import load_settings
from placet.store import Store, open_store
from tests.support.notify import Listener, notify_toml


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A listener that stops itself at teardown."""
    with Listener() as li:
        yield li


@pytest.fixture
def notify_store(placet_home: Path, listener: Listener) -> Iterator[Store]:
    """A store whose settings send ntfy and the webhook to `listener` (`notify_toml`)."""
    placet_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (placet_home / "config.toml").write_text(notify_toml(listener))
    with open_store(load_settings()) as s:
        yield s
