"""Fixtures the `placet web` tests share: the page served in-process on 127.0.0.1
(`tests.support.web.serve`) over the quiet store, or over a rig's store and drive."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from placet.store import Store
from tests.support.rig import Rig
from tests.support.web import Served, serve


@pytest.fixture
def served(quiet_store: Store) -> Iterator[Served]:
    """`placet web` over `quiet_store`, stopped at teardown."""
    with serve(quiet_store, quiet_store.settings) as s:
        yield s


@pytest.fixture
def served_rig(rig: Rig) -> Iterator[Served]:
    """`placet web` over `rig` (a local-folder drive: accepted proposals run)."""
    with serve(rig.store, rig.settings) as s:
        yield s
    rig.store.close()
