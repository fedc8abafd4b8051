"""Fixtures the executor tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placet.config import Settings
from placet.drive import RcloneDrive
from tests.support.rig import Rig, make_rig

if TYPE_CHECKING:
    from tests.support.drives import ServedRemote


@pytest.fixture
def webdav_rig(
    settings: Settings,
    tmp_path: Path,
    make_drive: Callable[..., RcloneDrive],
    webdav_server: ServedRemote,
    sub: str,
) -> Rig:
    (webdav_server.root / sub).mkdir()
    r = make_rig(settings, make_drive(webdav_server.spec(sub)), tmp_path, webdav_server.root / sub)
    assert r.drive.capabilities().hash_types == ()  # the premise: no digest at all
    return r
