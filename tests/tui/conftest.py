"""Fixtures the review UI tests share (fixed data and helpers in `tests.support.review`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from placet.config import Settings
from placet.store import Store, open_store
from tests.support.review import quiet


@pytest.fixture
def quiet_store(settings: Settings) -> Iterator[Store]:
    """A store over `quiet(settings)`: the sweep far away, roomy caps, the drive `DRIVE`."""
    with open_store(quiet(settings)) as s:
        yield s
