"""Reaching under the store, for tests that tamper with or inspect its database directly,
on whichever backend `settings` names (SQLite file or PostgreSQL server)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg

from placet.config import Settings
from placet.store.db import RawDB


@contextmanager
def raw_db(settings: Settings) -> Iterator[RawDB]:
    """An autocommit driver connection to the store's database (plain SQL with `?`
    markers; `begin`/`commit` for an explicit transaction). PostgreSQL's password comes
    from `PGPASSWORD`, as the store's does."""
    driver: Any = (
        psycopg.connect(settings.database, autocommit=True)
        if settings.database
        else sqlite3.connect(settings.db_path, isolation_level=None)
    )
    try:
        yield RawDB(driver)
    finally:
        driver.close()


def sql(settings: Settings, statement: str, *params: object) -> None:
    """Run one statement on the store's database, outside the store."""
    with raw_db(settings) as db:
        db.execute(statement, params)


def stored_datetime(value: object) -> datetime:
    """A naive-UTC datetime column as read raw: text on SQLite, a datetime on PostgreSQL."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
