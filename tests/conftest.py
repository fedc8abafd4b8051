"""Shared fixtures: every test runs with its own PLACET_HOME (a fresh data directory)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from placet.config import Settings, load_settings


@pytest.fixture(autouse=True)
def placet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point PLACET_HOME at a temp dir; drop PLACET_DB/PLACET_DRIVE from the outer env."""
    home = tmp_path / "placet-home"
    monkeypatch.setenv("PLACET_HOME", str(home))
    monkeypatch.delenv("PLACET_DB", raising=False)
    monkeypatch.delenv("PLACET_DRIVE", raising=False)
    yield home


@pytest.fixture
def settings(placet_home: Path) -> Settings:
    return load_settings()
