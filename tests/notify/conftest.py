"""Fixtures the notification tests share: a real HTTP listener on 127.0.0.1 standing in
for an ntfy server and a webhook receiver (`tests.support.notify.Listener`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.notify import Listener


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A listener that stops itself at teardown."""
    with Listener() as li:
        yield li
