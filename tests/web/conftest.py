"""Fixtures the `placet web` tests share: the page served in-process on 127.0.0.1
(`tests.support.web.serve`) over the quiet store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from placet.store import Store
from tests.support.web import Served, serve


@pytest.fixture
def served(quiet_store: Store) -> Iterator[Served]:
    """`placet web` over `quiet_store`, stopped at teardown."""
    with serve(quiet_store, quiet_store.settings) as s:
        yield s
