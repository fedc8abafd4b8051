"""Reaching under the store, for tests that tamper with or inspect its database directly,
on whichever backend `settings` names (SQLite file or PostgreSQL server)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import Engine

from placet.config import Settings
from placet.store.db import RawDB, make_engine, make_server_engine, prepare_db_file


@contextmanager
def raw_db(settings: Settings, *, autocommit: bool = True) -> Iterator[RawDB]:
    """A driver connection to the store's database (plain SQL with `?` markers). With
    `autocommit`, each statement commits (SQLite: until an explicit `begin`); without it,
    `begin(write=...)` then `commit` or `rollback` make one transaction on both.
    PostgreSQL's password comes from `PGPASSWORD`, as the store's does."""
    driver: Any = (
        psycopg.connect(settings.database, autocommit=autocommit)
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


def make_test_engine(settings: Settings) -> Engine:
    """An engine on the store's database as `open_store` builds it, without migrating."""
    if settings.database:
        return make_server_engine(settings.database)
    prepare_db_file(settings.db_path)
    return make_engine(settings.db_path)


def dump(settings: Settings) -> str:
    """Every row of every table of the store's database, as text (SQLite: `iterdump`)."""
    with raw_db(settings) as db:
        if not db.postgres:
            return "\n".join(db.driver.iterdump())
        tables = [
            t
            for (t,) in db.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            ).fetchall()
        ]
        return "\n".join(
            repr(row) for t in tables for row in db.execute(f'SELECT * FROM "{t}"').fetchall()
        )
