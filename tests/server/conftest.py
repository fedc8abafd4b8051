"""Fixtures the `placet serve` tests share: a workspace (a data dir, a root with files, a
local-folder drive; `tests.support.mcp`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mcp import Workspace, make_workspace


@pytest.fixture
def ws(tmp_path: Path, placet_home: Path) -> Workspace:
    """A fresh workspace under `tmp_path` (`make_workspace`)."""
    return make_workspace(tmp_path, placet_home)


@pytest.fixture
def yes_ws(ws: Workspace) -> Workspace:
    """`ws` whose config.toml also allows `placet accept --yes`."""
    ws.write_config(allow_yes=True)
    return ws
