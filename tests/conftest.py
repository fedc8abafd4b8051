"""Shared fixtures: every test runs with its own PLACET_HOME (a fresh data directory)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_fixtures import PgServer, create_database, start_pg_server

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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A real PostgreSQL server for the session (`pg_fixtures`)."""
    yield from start_pg_server()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_backend(
    request: pytest.FixtureRequest, placet_home: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Run the test once per store backend: SQLite (the default file) and PostgreSQL (a
    fresh database on the session's server, chosen by `PLACET_DB`, its password from
    `PGPASSWORD`). Name it in `pytestmark = pytest.mark.usefixtures("store_backend")` so
    it runs before `settings` reads the environment."""
    if request.param == "postgresql":
        server: PgServer = request.getfixturevalue("pg_server")
        monkeypatch.setenv("PLACET_DB", create_database(server))
        monkeypatch.setenv("PGPASSWORD", server.password)
    return str(request.param)
